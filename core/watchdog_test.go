package core_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// monitor records every command the server receives (MONITOR on a raw connection) until the
// returned function is called; it returns the lines seen.
func monitor(t *testing.T, addr string) func() []string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	var (
		mu    sync.Mutex
		lines []string
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			mu.Lock()
			lines = append(lines, line)
			mu.Unlock()
		}
	}()
	return func() []string {
		_ = conn.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return lines
	}
}

func lostCause(t *testing.T, ctx context.Context) *core.LostError {
	t.Helper()
	var le *core.LostError
	if !errors.As(context.Cause(ctx), &le) {
		t.Fatalf("cause = %v, want *LostError", context.Cause(ctx))
	}
	return le
}

func TestWatchdog_keyDeleted_cancelsWithinOneInterval(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	l, err := c.Acquire(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	rdb.Del(ctx, l.Key())
	select {
	case <-l.Context().Done():
	case <-time.After(ttl):
		t.Fatal("lock context not cancelled within the TTL after the key was deleted")
	}
	// (100 ms of slack for a loaded host: still short of the TTL, which a watchdog that noticed the
	// loss only at expiry would take.)
	if took, interval := time.Since(deleted), ttl/3; took > interval+100*time.Millisecond {
		t.Fatalf("loss detected after %v, want within one renewal interval (%v)", took, interval)
	}
	if le := lostCause(t, l.Context()); le.Reason != "not_owner" || !errors.Is(le, core.ErrLost) {
		t.Fatalf("lost reason %q", le.Reason)
	}
	if err := l.Release(ctx); !errors.Is(err, core.ErrNotHeld) || !errors.Is(err, core.ErrLost) {
		t.Fatalf("release after loss = %v", err)
	}
}

func TestWatchdog_redisStopped_cancelsBeforeExpiry(t *testing.T) {
	var (
		mu     sync.Mutex
		lastOK time.Time
	)
	hook := core.Hook{Renewed: func(_ context.Context, in core.HoldInfo) {
		if in.Renewed {
			mu.Lock()
			lastOK = in.Start
			mu.Unlock()
		}
	}}
	srv, _, c := setup(t, core.WithHook(hook))
	ctx := context.Background()
	const ttl = time.Second
	l, err := c.Acquire(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	lastOK = time.Now() // no later than the acquire's send time
	mu.Unlock()
	srv.Stop(t)
	select {
	case <-l.Context().Done():
	case <-time.After(2 * ttl):
		t.Fatal("lock context not cancelled after Redis stopped")
	}
	cancelled := time.Now()
	mu.Lock()
	expiry := lastOK.Add(ttl)
	mu.Unlock()
	if !cancelled.Before(expiry) {
		t.Fatalf("cancelled %v after the earliest possible expiry", cancelled.Sub(expiry))
	}
	if le := lostCause(t, l.Context()); le.Reason != "expired" {
		t.Fatalf("lost reason %q", le.Reason)
	}
	t.Logf("cancelled %v before the earliest expiry in Redis", expiry.Sub(cancelled))
}

func TestWatchdog_renewsManyTTLs_andNeverAfterRelease(t *testing.T) {
	renewals := make(chan string, 1000)
	hook := core.Hook{Renewed: func(_ context.Context, in core.HoldInfo) {
		if in.Renewed {
			renewals <- in.Lock.Name()
		}
	}}
	srv, rdb, c := setup(t, core.WithHook(hook))
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	a, err := c.Acquire(ctx, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(ctx, "b", ttl)
	if err != nil {
		t.Fatal(err)
	}
	// Held through 10 TTLs: every renewal must land or the context would be cancelled.
	count := map[string]int{}
	for count["a"] < 30 {
		select {
		case n := <-renewals:
			count[n]++
		case <-a.Context().Done():
			t.Fatalf("lock lost after %d renewals: %v", count["a"], context.Cause(a.Context()))
		case <-time.After(time.Second):
			t.Fatal("no renewal within a second")
		}
	}
	if d, err := a.TTL(ctx); err != nil || d <= 0 {
		t.Fatalf("TTL after 30 renewals = %v, %v", d, err)
	}
	// Release a right after one of its renewals completed (so none is in flight), with MONITOR on:
	// after the release, no command may touch a's key again, while b keeps being renewed.
	mon := monitor(t, srv.Addr())
	for {
		if n := <-renewals; n == "a" {
			break
		}
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	seenB := 0
	for seenB < 5 {
		select {
		case n := <-renewals:
			if n == "a" {
				t.Fatal("released lock renewed")
			}
			seenB++
		case <-time.After(time.Second):
			t.Fatal("b not renewed")
		}
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released, sawB := -1, false
	for i, l := range mon() {
		top := !strings.Contains(l, "lua]") // commands run inside scripts are logged too
		switch {
		case top && strings.Contains(l, strconv.Quote(locktest.Key("a"))) && strings.Contains(l, `"c:`):
			released = i // the release, whose message names the client (EVALSHA, and EVAL after NOSCRIPT)
		case top && released >= 0 && strings.Contains(l, strconv.Quote(locktest.Key("a"))):
			t.Fatalf("MONITOR: a command on the released lock after its release: %s", l)
		case top && released >= 0 && strings.Contains(l, strconv.Quote(locktest.Key("b"))):
			sawB = true
		}
	}
	if released < 0 || !sawB {
		t.Fatalf("MONITOR saw release of a: %v, renewals of b after it: %v (the check is blind)", released >= 0, sawB)
	}
	if lockHeld(t, rdb, a.Key()) {
		t.Fatal("released lock held again")
	}
}

func TestWatchdog_holdCountSurvivesRenewal(t *testing.T) {
	renewed := make(chan struct{}, 100)
	_, rdb, c := setup(t, core.WithHook(core.Hook{Renewed: func(_ context.Context, in core.HoldInfo) {
		if in.Renewed {
			renewed <- struct{}{}
		}
	}}))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "k", 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Acquire(l.Context(), "k", 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		select {
		case <-renewed:
		case <-time.After(time.Second):
			t.Fatal("not renewed")
		}
	}
	if got := lockState(t, rdb, l.Key()).Holds; got != 2 {
		t.Fatalf("hold count after renewals = %d, want 2", got)
	}
	if err := in.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// WithDriftFactor widens the margin kept before expiry: with 0.2 and Redis gone, the context ends
// about 200ms of a 1s TTL before the lock could expire in Redis.
func TestWatchdog_driftFactor_widensMargin(t *testing.T) {
	var (
		mu     sync.Mutex
		lastOK time.Time
	)
	hook := core.Hook{Renewed: func(_ context.Context, in core.HoldInfo) {
		if in.Renewed {
			mu.Lock()
			lastOK = in.Start
			mu.Unlock()
		}
	}}
	srv, _, c := setup(t, core.WithHook(hook), core.WithDriftFactor(0.2))
	ctx := context.Background()
	const ttl = time.Second
	mu.Lock()
	lastOK = time.Now()
	mu.Unlock()
	l, err := c.Acquire(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	select {
	case <-l.Context().Done():
	case <-time.After(2 * ttl):
		t.Fatal("not cancelled")
	}
	mu.Lock()
	margin := time.Until(lastOK.Add(ttl))
	mu.Unlock()
	if margin < 150*time.Millisecond {
		t.Fatalf("cancelled %v before the earliest expiry, want about 200ms", margin)
	}
	if _, err := core.New(srv.Client(t), core.WithDriftFactor(0.001)); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("drift factor 0.001: %v", err)
	}
}

// An acquisition answered after its validity deadline (here Redis is paused for longer than the
// TTL while the script waits in its socket) must not be handed out: its safety margin is spent
// before the caller sees it. Acquire reports ErrUnavailable and gives the lock back at once.
func TestAcquire_replyAfterValidity_givesLockBack(t *testing.T) {
	srv, _, c := setup(t)
	ctx := context.Background()
	const ttl = 500 * time.Millisecond
	warm, err := c.TryAcquire(ctx, "warm-up", ttl) // load the scripts
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Release(ctx)
	for _, try := range []bool{true, false} {
		srv.Pause(t)
		resume := time.AfterFunc(ttl+200*time.Millisecond, func() { srv.Resume(t) })
		var l *core.Lock
		if try {
			l, err = c.TryAcquire(ctx, "slow", ttl)
		} else {
			l, err = c.Acquire(ctx, "slow", ttl)
		}
		resume.Stop()
		if l != nil || !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("try %v: an acquisition answered after its validity returned a lock: %v, error %v", try, l != nil, err)
		}
		if heldOn(t, srv, locktest.Key("slow")) {
			t.Fatalf("try %v: the lock was not given back (PTTL %v): %v", try, srv.Do(t, "PTTL", locktest.Key("slow")), err)
		}
		t.Log(err)
	}
	l, err := c.TryAcquire(ctx, "slow", ttl)
	if err != nil {
		t.Fatalf("free lock after the slow acquisitions: %v", err)
	}
	_ = l.Release(ctx)
}
