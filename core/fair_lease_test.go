package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
)

// A fair grant's first lease is the waiter's TTL but at most its queue timeout: a waiter that died
// while queued keeps the lock for that timeout, not for its (here 20s) TTL.
func TestFair_handoff_deadWaiterKeepsLockNoLongerThanItsQueueTimeout(t *testing.T) {
	_, rdb, holder := setup(t)
	c := locktest.NewClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "deadlong", 10*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	// A dead waiter queued just now, as an attempt queues one: 20s TTL, 600ms queue timeout.
	member := "20000\x00600\x00dead-waiter-token\x000\x00host 1 dead"
	rdb.ZAdd(ctx, locktest.Key("deadlong", "queue"), redis.Z{Score: float64(2 * time.Now().UnixMicro()), Member: member})
	rdb.PExpire(ctx, locktest.Key("deadlong", "queue"), 10*time.Second)
	got := acquireFair(t, ctx, c, "deadlong", 10*time.Second)
	locktest.Eventually(t, 5*time.Second, "waiter queued", func() bool { return len(fairQueue(t, rdb, "deadlong")) == 2 })
	released := time.Now()
	_ = h.Release(ctx)
	if s := lockState(t, rdb, locktest.Key("deadlong")); s.Token != "dead-waiter-token" {
		t.Fatalf("after the release Redis records %+v: not handed to the dead waiter", s)
	}
	if d := rdb.PTTL(ctx, locktest.Key("deadlong")).Val(); d <= 0 || d > 600*time.Millisecond {
		t.Fatalf("the grant's lease is %v, want at most the waiter's 600ms queue timeout", d)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	defer l.Release(ctx)
	if took := time.Since(released); took > 5*time.Second {
		t.Fatalf("the live waiter took the lock %v after the release; the dead waiter's queue timeout is 600ms", took)
	}
}

// A live waiter granted the lock with a first lease shorter than its TTL (its queue timeout)
// keeps it: its watchdog lengthens the lease to the TTL before the first lease runs out.
func TestFair_handoff_shortFirstLeaseRenewed(t *testing.T) {
	_, rdb, holder := setup(t)
	var n counting
	c := locktest.NewClient(t, rdb, core.WithFairWaiterTimeout(900*time.Millisecond), n.hook())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "short", 10*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	got := acquireFair(t, ctx, c, "short", 6*time.Second)
	locktest.Eventually(t, 5*time.Second, "waiter queued and parked", func() bool {
		return len(fairQueue(t, rdb, "short")) == 1 && n.attempts.Load() == 2
	})
	before := n.attempts.Load()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	defer l.Release(ctx)
	if a := n.attempts.Load(); a != before {
		t.Fatalf("the grant was confirmed by %d attempt(s), not claimed: no short first lease was taken", a-before)
	}
	// The first lease is 900ms; the watchdog renews within a third of it, to the 6s TTL.
	locktest.Eventually(t, 2*time.Second, "lease lengthened to the TTL", func() bool {
		return rdb.PTTL(ctx, locktest.Key("short")).Val() > 2*time.Second
	})
	select {
	case <-l.Context().Done():
		t.Fatalf("lock ended: %v", context.Cause(l.Context()))
	default:
	}
	if s := lockState(t, rdb, locktest.Key("short")); s.Token != l.Token() {
		t.Fatalf("Redis records %+v, want the waiter's token", s)
	}
}
