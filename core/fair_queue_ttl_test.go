package core_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// Issue #16, defect 9: a fair waiter with a short timeout does not cut the queue's lifetime under
// a waiter with a longer one: the queue's TTL is only ever lengthened.
func TestFair_shortWaiterKeepsQueueTTL(t *testing.T) {
	srv, rdb, holder := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var name, queue, deadlines = "q", locktest.Key("q", "queue"), locktest.Key("q", "queue", "deadlines")
	l, err := holder.Acquire(ctx, name, 30*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	const longTimeout = 20 * time.Second
	long := locktest.NewClient(t, srv.Client(t), core.WithFairWaiterTimeout(longTimeout))
	short := locktest.NewClient(t, srv.Client(t), core.WithFairWaiterTimeout(200*time.Millisecond))
	done := make(chan error, 2)
	wait := func(c *core.Client) {
		_, err := c.Acquire(ctx, name, time.Second, core.Fair())
		done <- err
	}
	go wait(long)
	locktest.Eventually(t, 5*time.Second, "long waiter queued", func() bool { return rdb.ZCard(ctx, queue).Val() == 1 })
	first := rdb.ZRange(ctx, queue, 0, 0).Val()[0]
	go wait(short)
	locktest.Eventually(t, 5*time.Second, "short waiter queued", func() bool { return rdb.ZCard(ctx, queue).Val() == 2 })
	second := rdb.ZRange(ctx, queue, 1, 1).Val()[0]
	joined, _ := rdb.HGet(ctx, deadlines, second).Int64()
	// The queue outlives the long waiter's deadline; the deadlines hash (of the waiters that
	// refreshed theirs, see internal/script/lua/queue.lua) outlives every deadline it records.
	check := func(when string) {
		t.Helper()
		if d := rdb.PTTL(ctx, queue).Val(); d < longTimeout {
			t.Fatalf("%s: PTTL(%s) = %v, below the long waiter's timeout %v", when, queue, d, longTimeout)
		}
		now := time.Now().UnixMilli()
		for m, v := range rdb.HGetAll(ctx, deadlines).Val() {
			dl, _ := strconv.ParseInt(v, 10, 64)
			if d := rdb.PTTL(ctx, deadlines).Val(); d < time.Duration(dl-now)*time.Millisecond {
				t.Fatalf("%s: PTTL(%s) = %v, below the deadline of %q (%v from now)", when, deadlines, d, m, time.Duration(dl-now)*time.Millisecond)
			}
		}
	}
	check("after the short waiter joined")
	locktest.Eventually(t, 5*time.Second, "short waiter refreshed its place", func() bool {
		d, _ := rdb.HGet(ctx, deadlines, second).Int64()
		return d > joined
	})
	check("after the short waiter refreshed")
	if rdb.ZRange(ctx, queue, 0, 0).Val()[0] != first {
		t.Fatal("the long waiter lost its place")
	}
	cancel()
	for range 2 {
		<-done
	}
	_ = l.Release(context.Background())
}
