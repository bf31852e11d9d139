package redistest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/lockkit/lockkit/internal/redistest"
)

// fakeTB records Skip and Fatal instead of ending the test; everything else
// goes to the real test.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	skipped bool
	fataled bool
	msg     string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) end(flag *bool, msg string) {
	f.mu.Lock()
	*flag, f.msg = true, msg
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Skip(args ...any)                 { f.end(&f.skipped, fmt.Sprint(args...)) }
func (f *fakeTB) Skipf(format string, args ...any) { f.end(&f.skipped, fmt.Sprintf(format, args...)) }
func (f *fakeTB) Fatal(args ...any)                { f.end(&f.fataled, fmt.Sprint(args...)) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.end(&f.fataled, fmt.Sprintf(format, args...))
}

// run calls fn with a fakeTB on its own goroutine, so that Skip and Fatal can
// end it, and returns the fake.
func run(t *testing.T, fn func(testing.TB)) *fakeTB {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestRequireMissingBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		f := run(t, redistest.Require)
		if f.skipped != (ci == "") || f.fataled != (ci != "") {
			t.Errorf("CI=%q: skipped %v, fataled %v", ci, f.skipped, f.fataled)
		}
		for _, want := range []string{"redis-server", "apt-get install -y redis-server redis-tools", "make test"} {
			if !strings.Contains(f.msg, want) {
				t.Errorf("CI=%q: message %q does not mention %q", ci, f.msg, want)
			}
		}
	}
}

func TestRequirePresent(t *testing.T) {
	redistest.Require(t) // skips the whole package's real-server tests alike
	f := run(t, redistest.Require)
	if f.skipped || f.fataled {
		t.Fatalf("Require with redis-server on PATH: %s", f.msg)
	}
}

func TestWithTLSSkipsWithoutTLSBuild(t *testing.T) {
	redistest.Require(t)
	// A fake redis-server that rejects --tls-port like a build without TLS.
	dir := t.TempDir()
	fake := "#!/bin/sh\necho \"*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\"\n" +
		"echo \"Bad directive or wrong number of arguments\"\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "redis-server"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "redis-cli"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	f := run(t, func(tb testing.TB) { redistest.Start(tb, redistest.WithTLS()) })
	if !f.skipped || !strings.Contains(f.msg, "without TLS support") {
		t.Fatalf("Start(WithTLS) with a non-TLS build: skipped %v, fataled %v, message %q", f.skipped, f.fataled, f.msg)
	}
}

func TestStartFailureShowsLog(t *testing.T) {
	redistest.Require(t)
	f := run(t, func(tb testing.TB) { redistest.Start(tb, redistest.WithArgs("--no-such-directive", "1")) })
	if !f.fataled || !strings.Contains(f.msg, "Bad directive") || !strings.Contains(f.msg, "no-such-directive") {
		t.Fatalf("Start with a bad argument: fataled %v, message %q", f.fataled, f.msg)
	}
}
