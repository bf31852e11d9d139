package lockkittest_test

import (
	"context"
	"crypto/fips140"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/lockkittest"
)

// In FIPS 140-only mode (GODEBUG=fips140=only) NewClient works (a redis-server process in place of
// miniredis, which hashes scripts with SHA-1) or, without a redis-server on PATH, fails the test
// saying why: never a panic (#47: crypto/sha1: use of SHA-1 is not allowed in FIPS 140-only mode,
// from miniredis's sha1Hex). It runs this test binary again in that mode.
func TestNewClient_fips140Only(t *testing.T) {
	if os.Getenv("LOCKKITTEST_FIPS_CHILD") == "1" {
		if !fips140.Enforced() {
			t.Fatal("the child runs without fips140=only")
		}
		ctx := context.Background()
		srv := lockkittest.NewServer(t)
		a, b := srv.Client(t), srv.Client(t)
		l, err := a.Acquire(ctx, "fips", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryAcquire(ctx, "fips", time.Second); err == nil {
			t.Fatal("a second client took a held lock")
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNewClient_fips140Only$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG=fips140=only", "LOCKKITTEST_FIPS_CHILD=1")
	out, err := cmd.CombinedOutput()
	_, lookErr := exec.LookPath("redis-server")
	switch {
	case strings.Contains(string(out), "panic"):
		t.Fatalf("NewClient under GODEBUG=fips140=only panicked:\n%s", out)
	case lookErr == nil && err != nil:
		t.Fatalf("NewClient under GODEBUG=fips140=only, with a redis-server on PATH: %v\n%s", err, out)
	case lookErr != nil && (err == nil || !strings.Contains(string(out), "no redis-server is on PATH")):
		t.Fatalf("NewClient under GODEBUG=fips140=only, without a redis-server: %v, want a failure saying so:\n%s", err, out)
	}
}
