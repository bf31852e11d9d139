package core

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
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

// A hold whose validity deadline passed before the watchdog's timer fired for it (a process
// starved of CPU: issue #44's starved runs, where the timer fired up to 47 ms after the deadline)
// reads as ended through its context's Err at once: the context is cancelled with an "expired"
// loss, Release answers ErrNotHeld, the Lost hook runs and the lock is given back in Redis.
func TestHoldCtx_errEndsAHoldPastItsDeadlineBeforeTheTimer(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	lost := make(chan HoldInfo, 1)
	c, err := New(rdb, WithHook(Hook{Lost: func(_ context.Context, in HoldInfo) { lost <- in }}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { _ = c.Close(ctx) })
	l, err := c.TryAcquire(ctx, "late-timer", time.Minute) // (the watchdog's first wake: 5 s away)
	if err != nil {
		t.Fatal(err)
	}
	hctx := l.Context()
	if err := hctx.Err(); err != nil {
		t.Fatalf("a hold valid for a minute: Err = %v", err)
	}
	c.wd.mu.Lock()
	c.wd.setValid(l.entry, time.Now().Add(-time.Millisecond)) // (as if the timer were late)
	c.wd.mu.Unlock()

	var le *LostError
	if err := hctx.Err(); !errors.Is(err, context.Canceled) || !errors.As(context.Cause(hctx), &le) || le.Reason != "expired" {
		t.Fatalf("past its validity deadline: Err = %v, cause %v; want Canceled, an expired *LostError", err, context.Cause(hctx))
	}
	select {
	case <-hctx.Done():
	default:
		t.Fatal("Err reported the hold ended while Done was open")
	}
	if err := l.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release after Err ended the hold: %v, want ErrNotHeld", err)
	}
	select {
	case in := <-lost:
		if in.Lock != l {
			t.Fatalf("Lost reported %v, want the hold", in.Lock)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hook's Lost did not run within 10 s")
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		v, err := rdb.Get(ctx, l.k.Main).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		if s, _ := ParseLockState(v); !s.Held() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock was not given back within 10 s: %q", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A re-entered hold whose context was never made is released after the acquisition's validity
// deadline passed, before the watchdog's timer fired: its release asks whether the outer hold's
// context ended without reading that context's Err, which would end the acquisition under the
// inner hold's mutex and deadlock.
func TestHoldCtx_releaseOfAReentryPastTheDeadline(t *testing.T) {
	srv := redistest.Start(t)
	c, err := New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { _ = c.Close(ctx) })
	outer, err := c.TryAcquire(ctx, "reentered", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	octx := outer.Context()
	in, err := c.Acquire(octx, "reentered", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.wd.mu.Lock()
	c.wd.setValid(outer.entry, time.Now().Add(-time.Millisecond))
	c.wd.mu.Unlock()
	released := make(chan error, 1)
	go func() { released <- in.Release(ctx) }()
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("the re-entry's release: %v (Redis still held it)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the re-entry's release did not return within 10 s")
	}
	if err := octx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("the outer hold past its deadline: Err = %v", err)
	}
}
