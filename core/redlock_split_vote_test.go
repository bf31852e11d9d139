package core_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// Issue #38, the pipelined Redlock stall on a hot key: contenders that arrive together split the
// nodes' votes (each is granted a minority) and give their grants back at once. Those give-backs
// wake no waiter, for a Redlock waiter wakes on a release published by a quorum of nodes, so every
// contender sleeps its fallback delay, which only grows (1 s at the default maximum): one critical
// section a second while the lock is free. A waiter whose attempt was granted on a minority of the
// nodes now tries once more after a couple of round trips, when the other minorities have been
// given back, not after its fallback delay.
func TestRedlock_splitVote_retriesSoon(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	ctx := context.Background()
	// Two other owners each hold one node (B and C): the vote is split, and nobody holds a quorum.
	var others []*core.Lock
	for _, s := range srvs[1:] {
		c := locktest.NewClient(t, s.Client(t))
		l, err := c.Acquire(ctx, "split", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, l)
	}
	var once sync.Once
	var attempts atomic.Int32
	giveBack := func() { // the other minorities are given back right after the waiter's attempt
		for _, l := range others {
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	// A long fallback delay: the waiter must not need it.
	const fallback = 3 * time.Second
	w := redlockClient(t, srvs, core.WithRetryBackoff(fallback, 2*fallback), core.WithHook(core.Hook{
		Attempt: func(_ context.Context, in core.WaitInfo) {
			// (The first failed attempt is followed by another as soon as the waiter subscribed:
			// the split must outlast it for the waiter to park.)
			if attempts.Add(1) == 2 && !in.Acquired {
				once.Do(giveBack)
			}
		},
	}))
	start := time.Now()
	l, err := w.Acquire(ctx, "split", 10*time.Second, core.WithWait(2*fallback))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	_ = l.Release(ctx)
	if n := attempts.Load(); n < 3 {
		t.Fatalf("acquired in %d attempt(s): the vote was not split", n)
	}
	if took >= fallback/2 {
		t.Fatalf("the waiter took %v after a split vote (fallback delay %v, jittered down to half)", took, fallback)
	}
}
