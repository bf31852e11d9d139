package main_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // the doc fixture cuts a client's network: its dial errors are expected
	locktest.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// build compiles the command into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lockkit")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// session runs the binary and records a transcript, masked, for a golden file.
type session struct {
	t      *testing.T
	bin    string
	env    []string
	masks  []string // old, new pairs, applied before the patterns
	script bytes.Buffer
}

func newSession(t *testing.T, bin string, env ...string) *session {
	host, _ := os.Hostname()
	s := &session{t: t, bin: bin, env: append(os.Environ(), env...)}
	s.mask(host+"/"+strconv.Itoa(os.Getpid()), "HOST/PID")
	s.mask(host, "HOST")
	return s
}

// mask replaces old by repl in transcripts (digests, fences, addresses: values a run chooses).
func (s *session) mask(old, repl string) { s.masks = append(s.masks, old, repl) }

// maskLock masks the token digest of l as NAME-digest. (Fences are masked as FENCE: two locks
// taken in the same millisecond may have the same.)
func (s *session) maskLock(l *core.Lock, name string) {
	sum := sha256.Sum256([]byte(l.Token()))
	s.mask(hex.EncodeToString(sum[:])[:12], name+"-digest")
}

var volatile = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "TIME"},
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d\.\d{3}\b`), "HH:MM:SS"},
	{regexp.MustCompile(`"(ttl_ms|held_for_ms|age_ms)":\d+`), `"$1":N`},
	{regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ms|s|µs)\b`), "DUR"},
	{regexp.MustCompile(`\b\d{15,}\b`), "FENCE"},
	// A free name's last fence: 0 or a fence, as long as core keeps the counter of a freed name.
	{regexp.MustCompile(`(?m)^last fence(\s+)(\d+|FENCE)$`), "last fence${1}LAST"},
	{regexp.MustCompile(`pid(\s+)\d+`), "pid${1}PID"},
	{regexp.MustCompile(`"pid":\d+`), `"pid":PID`},
	// The processes subscribed to a name's release channels: a waiter's subscription outlives it by
	// up to 3 s (waiters.go); TestLs_queuedCountsWaitersQueuedInRedis checks the counts.
	{regexp.MustCompile(`"subscribed_processes":\d+`), `"subscribed_processes":W`},
	{regexp.MustCompile(`(?m)^waiting processes(\s+)\d+`), "waiting processes${1}W"},
	{regexp.MustCompile(`(?m)(\s+FENCE\s+\d+\s+)\d+$`), "${1}W"},
	{regexp.MustCompile(`  +`), "  "}, // tabwriter alignment follows the masked values' widths
}

// run runs the command with args (stdin: input) and adds it to the transcript; it returns its
// stdout and exit code.
func (s *session) run(input string, args ...string) (string, int) {
	s.t.Helper()
	stdout, _, code := s.run3(input, args...)
	return stdout, code
}

// run3 is run, returning stderr too.
func (s *session) run3(input string, args ...string) (string, string, int) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = s.env
	cmd.Stdin = strings.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	fmt.Fprintf(&s.script, "$ lockkit %s\n", s.clean(strings.Join(args, " ")))
	s.script.WriteString(s.clean(stdout.String()))
	if stderr.Len() > 0 {
		fmt.Fprintf(&s.script, "[stderr]\n%s", s.clean(stderr.String()))
	}
	fmt.Fprintf(&s.script, "[exit %d]\n\n", code)
	return stdout.String(), stderr.String(), code
}

func (s *session) clean(out string) string {
	for i := 0; i < len(s.masks); i += 2 {
		out = strings.ReplaceAll(out, s.masks[i], s.masks[i+1])
	}
	for _, v := range volatile {
		out = v.re.ReplaceAllString(out, v.repl)
	}
	return out
}

// golden compares the transcript with testdata/NAME.golden (rewritten with -update).
func (s *session) golden(name string) {
	s.t.Helper()
	path := filepath.Join("testdata", name+".golden")
	got := s.script.Bytes()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		s.t.Errorf("transcript differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func acquire(t *testing.T, c *core.Client, ctx context.Context, name string, opts ...core.AcquireOption) *core.Lock {
	t.Helper()
	l, err := c.Acquire(ctx, name, 30*time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// columns splits a table's row (tabwriter pads with two spaces or more).
var columns = regexp.MustCompile(`  +`)
