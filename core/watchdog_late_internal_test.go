package core

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
)

// logLines is a slog handler's output, safe to read while the watchdog writes it.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count returns how many lines contain s.
func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// When this process's timers run later than a hold's TTL can cover (the guard they ask for is
// more than TTL/4, where it is capped), the Client says so: once, with the lateness, the TTL and
// the TTL that would cover it, and not again on every round (issue #44: loud, never silent).
func TestWatchdog_lateTimers_warnOnceForAShortTTL(t *testing.T) {
	srv := redistest.Start(t)
	var out logLines
	c, err := New(srv.Client(t), WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { _ = c.Close(ctx) })
	l, err := c.TryAcquire(ctx, "short", 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	const msg = "timers run too late for a lock's TTL"
	if n := out.count(msg); n != 0 {
		t.Fatalf("warned %d times before any lateness", n)
	}

	// The timer fired 100 ms late once: a guard of 200 ms, more than 600 ms/4.
	c.wd.mu.Lock()
	c.wd.late.observe(time.Now(), 100*time.Millisecond)
	c.wd.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for out.count(msg) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if out.count(msg) == 0 {
		t.Fatalf("no warning within 5 s of a lateness a 600ms TTL cannot cover; log:\n%s", out.buf.String())
	}
	rounds := c.wd.pipelines.Load()
	for c.wd.pipelines.Load() < rounds+3 && time.Now().Before(deadline.Add(5*time.Second)) {
		time.Sleep(5 * time.Millisecond)
	}
	if c.wd.pipelines.Load() < rounds+3 {
		t.Fatalf("the watchdog renewed %d times in 5 s", c.wd.pipelines.Load()-rounds)
	}
	if n := out.count(msg); n != 1 {
		t.Fatalf("warned %d times over three more renewal rounds, want once; log:\n%s", n, out.buf.String())
	}
	for _, want := range []string{"ttl=600ms", "timer_lateness=100ms", "min_ttl=800ms", "docs/guarantees.md#choosing-a-ttl"} {
		if out.count(want) == 0 {
			t.Errorf("the warning does not say %q; log:\n%s", want, out.buf.String())
		}
	}
}
