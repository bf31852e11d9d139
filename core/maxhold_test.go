package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// A max-held holder is released at d (± one renewal interval) while Redis is healthy and renewals
// succeed; its context's cause is a *MaxHoldError (not a loss); a waiter gets the lock.
func TestMaxHold_endsHoldWhileRenewalsSucceed(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	const ttl, limit = 600 * time.Millisecond, time.Second
	interval := ttl / 3
	l, err := c.Acquire(ctx, "mh", ttl, core.WithMaxHold(limit))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got := make(chan time.Time, 1)
	go func() {
		w, err := c.Acquire(ctx, "mh", ttl, core.WithWait(5*time.Second))
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- time.Now()
		_ = w.Release(ctx)
	}()
	select {
	case <-l.Context().Done():
	case <-time.After(limit + 2*time.Second):
		t.Fatal("the hold did not end")
	}
	ended := time.Since(start)
	t.Logf("hold ended %v after it began (limit %v, renewal interval %v)", ended, limit, interval)
	if ended < limit-5*time.Millisecond || ended > limit+interval {
		t.Fatalf("hold ended after %v, want %v (+ at most %v)", ended, limit, interval)
	}
	cause := context.Cause(l.Context())
	var mh *core.MaxHoldError
	if !errors.As(cause, &mh) || !errors.Is(cause, core.ErrMaxHold) || errors.Is(cause, core.ErrLost) || mh.Limit != limit {
		t.Fatalf("cause = %v, want a *MaxHoldError with limit %v", cause, limit)
	}
	at, ok := <-got
	if !ok {
		t.Fatal("waiter did not acquire")
	}
	// The lock expires 600ms after a renewal: a waiter that got it before 'limit' would prove that
	// renewals had stopped (and after, that the release, not the expiry, woke it).
	if w := at.Sub(start); w < limit-5*time.Millisecond || w > limit+interval+ttl/2 {
		t.Fatalf("waiter acquired %v after the hold began, want just after %v", w, limit)
	}
	if err := l.Release(ctx); !errors.Is(err, core.ErrNotHeld) || !errors.Is(err, core.ErrMaxHold) {
		t.Fatalf("Release after max hold = %v, want ErrNotHeld and ErrMaxHold", err)
	}
}

// The Client default applies unless an acquisition sets its own; WithMaxHold(0) lifts it.
func TestMaxHold_clientDefaultAndOverride(t *testing.T) {
	_, _, c := setup(t, core.WithDefaultMaxHold(200*time.Millisecond))
	ctx := context.Background()
	limited, err := c.Acquire(ctx, "mh-default", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	free, err := c.Acquire(ctx, "mh-free", time.Second, core.WithMaxHold(0))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-limited.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the default maximum hold did not end the hold")
	}
	if !errors.Is(context.Cause(limited.Context()), core.ErrMaxHold) {
		t.Fatalf("cause = %v", context.Cause(limited.Context()))
	}
	locktest.Eventually(t, time.Second, "the limited lock to be free", func() bool {
		l, err := c.TryAcquire(ctx, "mh-default", time.Second, core.WithMaxHold(0))
		if err == nil {
			_ = l.Release(ctx)
		}
		return err == nil
	})
	if err := free.Context().Err(); err != nil {
		t.Fatalf("WithMaxHold(0) hold ended: %v", context.Cause(free.Context()))
	}
	if _, err := free.TTL(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "x", time.Second, core.WithMaxHold(-1)); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("negative max hold: %v", err)
	}
	if _, err := core.New(nil, core.WithDefaultMaxHold(-1)); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("negative default: %v", err)
	}
}

// A re-entry through the lock's context is nested work: it ends with the limited hold it entered
// (both released together). A WithOwner re-entry is an independent hold with its own limit (none
// here): the lock stays held until it is released.
func TestMaxHold_reentrantHolds(t *testing.T) {
	_, rdb, c := setup(t)
	other := locktest.NewClient(t, rdb)
	ctx := context.Background()
	outer, err := c.Acquire(ctx, "mh-re", time.Second, core.WithMaxHold(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	nested, err := c.Acquire(outer.Context(), "mh-re", time.Second, core.WithMaxHold(0))
	if err != nil || nested.Holds() == 1 {
		t.Fatalf("re-entry: %v", err)
	}
	owner, err := c.Acquire(ctx, "mh-re", time.Second, core.WithOwner(outer.Token()), core.WithMaxHold(0))
	if err != nil || owner.Holds() != 3 {
		t.Fatalf("WithOwner re-entry: %v", err)
	}
	<-outer.Context().Done()
	<-nested.Context().Done()
	for _, l := range []*core.Lock{outer, nested} {
		if err := l.Release(ctx); !errors.Is(err, core.ErrMaxHold) {
			t.Fatalf("Release of an ended hold = %v, want ErrMaxHold", err)
		}
	}
	locktest.Eventually(t, time.Second, "the two holds released", func() bool {
		st := lockState(t, rdb, owner.Key())
		return st.Token == owner.Token() && st.Holds == 1
	})
	if err := owner.Context().Err(); err != nil {
		t.Fatalf("the WithOwner hold ended: %v", context.Cause(owner.Context()))
	}
	if _, err := other.TryAcquire(ctx, "mh-re", time.Second); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("lock free while the WithOwner hold lives: %v", err)
	}
	if err := owner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := other.TryAcquire(ctx, "mh-re", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
}

// Do reports the maximum hold, joined with fn's error.
func TestMaxHold_Do(t *testing.T) {
	_, _, c := setup(t)
	err := c.Do(context.Background(), "mh-do", time.Second, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}, core.WithMaxHold(100*time.Millisecond))
	if !errors.Is(err, core.ErrMaxHold) || !errors.Is(err, context.Canceled) || errors.Is(err, core.ErrLost) {
		t.Fatalf("Do = %v, want ErrMaxHold joined with context.Canceled", err)
	}
}

// Over Redlock the hold ends the same way and every node's copy is released.
func TestMaxHold_redlock(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	// Every node gets time to answer the release (a node abandoned at the default node timeout,
	// TTL/20, would keep its copy until the TTL on a loaded host).
	const nodeTimeout = 2 * time.Second
	c := redlockClient(t, srvs, core.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "mh-rl", 5*time.Second, core.WithMaxHold(300*time.Millisecond)) // expires far later
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the hold did not end")
	}
	if !errors.Is(context.Cause(l.Context()), core.ErrMaxHold) {
		t.Fatalf("cause = %v", context.Cause(l.Context()))
	}
	locktest.Eventually(t, 2*nodeTimeout, "every node released", func() bool {
		for _, s := range srvs {
			if heldOn(t, s, l.Key()) {
				return false
			}
		}
		return true
	})
}
