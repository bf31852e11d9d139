package core_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
)

// A waiter that gives up after a release granted it a permit (it heard of the grant too late)
// hands the permit on to the next waiter at once: the permit is neither lost for its lease TTL nor
// held by two.
func TestPermits_handoff_waiterGivesUpGrantHandedOn(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			srv, rdb, holder := setup(t)
			opts := []core.AcquireOption{core.Permits(1)}
			if fair {
				opts = append(opts, core.Fair())
			}
			// W1 hears everything 300ms late (its grant message too); both poll rarely (W2: 2.5s or more).
			slow := redis.NewClient(srv.StartDelayProxy(t, 300*time.Millisecond).Options())
			t.Cleanup(func() { slow.Close() })
			w1c := locktest.NewClient(t, slow, core.WithRetryBackoff(5*time.Second, 10*time.Second))
			w2c := locktest.NewClient(t, rdb, core.WithRetryBackoff(5*time.Second, 10*time.Second), core.WithFairWaiterTimeout(30*time.Second))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h, err := holder.Acquire(ctx, "gone", 10*time.Second, opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx1, cancel1 := context.WithCancel(ctx)
			w1 := make(chan error, 1)
			go func() {
				_, err := w1c.Acquire(ctx1, "gone", 10*time.Second, opts...)
				w1 <- err
			}()
			locktest.Eventually(t, 5*time.Second, "W1 queued", func() bool { return len(queued(t, rdb, locktest.Key("gone", "permits", "queue"))) == 1 })
			locktest.Eventually(t, 5*time.Second, "W1 parked", func() bool { return core.WaitersParked(w1c) == 1 })
			w2 := make(chan *core.Lock, 1)
			go func() {
				p, err := w2c.Acquire(ctx, "gone", 10*time.Second, opts...)
				if err != nil {
					t.Error(err)
				}
				w2 <- p
			}()
			locktest.Eventually(t, 5*time.Second, "W2 queued", func() bool { return len(queued(t, rdb, locktest.Key("gone", "permits", "queue"))) == 2 })
			locktest.Eventually(t, 5*time.Second, "W2 parked", func() bool { return core.WaitersParked(w2c) == 1 })
			w1tok := queued(t, rdb, locktest.Key("gone", "permits", "queue"))[0].tok
			released := time.Now()
			if err := h.Release(ctx); err != nil { // grants the permit to W1, which hears it 300ms late
				t.Fatal(err)
			}
			if n := rdb.ZScore(ctx, locktest.Key("gone", "permits"), w1tok).Val(); n == 0 {
				t.Fatal("the release did not grant the permit to the queue's head")
			}
			cancel1() // W1 gives up first
			if err := <-w1; err == nil {
				t.Fatal("W1 acquired although it gave up")
			}
			p := <-w2
			took := time.Since(released)
			t.Logf("W2 got the permit %v after the release", took.Round(time.Millisecond))
			if took > 2*time.Second { // (W2 polls after 2.5s or more; the grant's lease is 10s)
				t.Fatalf("W2 got the permit %v after the release: not handed on when W1 gave up", took)
			}
			if p.Fence() <= h.Fence() {
				t.Fatalf("fence %d after %d: not increasing", p.Fence(), h.Fence())
			}
			if m := rdb.ZRange(ctx, locktest.Key("gone", "permits"), 0, -1).Val(); len(m) != 1 {
				t.Fatalf("permits held: %v, want W2's only", m)
			}
			_ = p.Release(ctx)
		})
	}
}

// A waiter that died while queued is granted a permit by a release all the same (nothing tells
// Redis it is gone before its queue deadline); the grant is a lease like any other: it expires
// after the waiter's TTL and the next waiter takes the permit, with a higher fence. Every key of
// the queue has a TTL.
func TestPermits_handoff_deadWaiterGrantExpires(t *testing.T) {
	_, rdb, holder := setup(t)
	c := locktest.NewClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "dead", 10*time.Second, core.Permits(1))
	if err != nil {
		t.Fatal(err)
	}
	// A dead waiter, queued as an attempt queues one: a 500ms lease, limit 1, live for 5s.
	const dead = "dead-waiter-token"
	enqueue(t, rdb, locktest.Key("dead", "permits", "queue"), dead, "1", 500*time.Millisecond, 5*time.Second, time.Now())
	got := make(chan *core.Lock, 1)
	go func() {
		p, err := c.Acquire(ctx, "dead", 10*time.Second, core.Permits(1))
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	locktest.Eventually(t, 5*time.Second, "waiter queued", func() bool { return len(queued(t, rdb, locktest.Key("dead", "permits", "queue"))) == 2 })
	// (The deadlines hash exists once a waiter refreshed its place: then it has a TTL too.)
	for _, k := range []string{locktest.Key("dead", "permits", "queue"), locktest.Key("dead", "permits", "queue", "deadlines")} {
		if d := rdb.PTTL(ctx, k).Val(); d <= 0 && !(d == -2*time.Nanosecond && strings.HasSuffix(k, ":deadlines")) {
			t.Fatalf("%s: PTTL %v, want a TTL", k, d)
		}
	}
	released := time.Now()
	_ = h.Release(ctx)
	deadFence, err := rdb.HGet(ctx, locktest.Key("dead", "permits", "fences"), dead).Int64()
	if err != nil || deadFence <= h.Fence() {
		t.Fatalf("the dead waiter's grant: fence %d (%v), after %d", deadFence, err, h.Fence())
	}
	p := <-got
	took := time.Since(released)
	t.Logf("the live waiter took the permit %v after the release", took.Round(time.Millisecond))
	if took < 400*time.Millisecond || took > 3*time.Second {
		t.Fatalf("took the permit %v after the release; want after the dead waiter's 500ms lease", took)
	}
	if p.Fence() <= deadFence {
		t.Fatalf("fence %d after the dead waiter's %d", p.Fence(), deadFence)
	}
	_ = p.Release(ctx)
}

// A grant message for an older attempt of a waiter (its lease is gone: reclaimed, or taken by that
// later attempt) is ignored: the waiter does not hold a permit Redis does not record.
func TestPermits_handoff_staleGrantIgnored(t *testing.T) {
	_, rdb, holder := setup(t)
	c := locktest.NewClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "stale", 10*time.Second, core.Permits(1))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	res := make(chan error, 1)
	go func() {
		p, err := c.Acquire(wctx, "stale", 10*time.Second, core.Permits(1))
		if err == nil {
			_ = p.Release(ctx)
		}
		res <- err
	}()
	locktest.Eventually(t, 5*time.Second, "waiter queued", func() bool { return len(queued(t, rdb, locktest.Key("stale", "permits", "queue"))) == 1 })
	locktest.Eventually(t, 5*time.Second, "waiter parked", func() bool { return core.WaitersParked(c) == 1 })
	w := queued(t, rdb, locktest.Key("stale", "permits", "queue"))[0]
	tok, epoch := w.tok, w.epoch
	sum := sha1.Sum([]byte(tok))
	msg := "g:" + hex.EncodeToString(sum[:]) + ":" + strconv.FormatInt(h.Fence()+1, 10) + ":" + strconv.FormatInt(epoch-1, 10)
	rdb.Publish(ctx, locktest.Key("stale", "permits", "released"), msg)
	if err := <-res; !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("after a stale grant: %v, want ErrNotAcquired (the waiter timed out)", err)
	}
	locktest.Eventually(t, 2*time.Second, "waiter dequeued", func() bool { return len(queued(t, rdb, locktest.Key("stale", "permits", "queue"))) == 0 })
}

// A permit taken by handoff is a lease like any other: its holder counts it from its last attempt
// (sent before the grant), so when its renewals fail, its context is cancelled before Redis could
// hand the permit to anyone else.
func TestPermits_handoff_renewalsFail_cancelledBeforeHandedOn(t *testing.T) {
	srv, rdb, holder := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cut := &failRenewals{}
	a := srv.Client(t)
	a.AddHook(cut)
	var byAttempt atomic.Int64
	ca := locktest.NewClient(t, a, core.WithRetryBackoff(5*time.Second, 10*time.Second), core.WithHook(core.Hook{
		Attempt: func(_ context.Context, w core.WaitInfo) {
			if w.Acquired {
				byAttempt.Add(1)
			}
		}}))
	cb := locktest.NewClient(t, rdb)
	const ttl = 300 * time.Millisecond
	h, err := holder.Acquire(ctx, "cut2", 10*time.Second, core.Permits(1))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lock, 1)
	go func() {
		p, err := ca.Acquire(ctx, "cut2", ttl, core.Permits(1))
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	locktest.Eventually(t, 5*time.Second, "waiter parked", func() bool { return core.WaitersParked(ca) == 1 })
	time.Sleep(100 * time.Millisecond) // the waiter's last attempt is 100ms old when it is granted
	cut.on.Store(true)                 // (renewals are pipelined; acquire attempts are not)
	_ = h.Release(ctx)
	p := <-got
	if p == nil {
		t.FailNow()
	}
	if n := byAttempt.Load(); n != 0 {
		t.Fatalf("%d attempts acquired: the permit was not taken by handoff", n)
	}
	var lostAt atomic.Int64
	context.AfterFunc(p.Context(), func() { lostAt.Store(time.Now().UnixNano()) })
	var next *core.Lock
	for next == nil {
		next, err = cb.TryAcquire(ctx, "cut2", ttl, core.Permits(1))
		if err != nil && !errors.Is(err, core.ErrNotAcquired) {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatal("never acquired")
		}
		if next == nil {
			time.Sleep(2 * time.Millisecond)
		}
	}
	handed := time.Now().UnixNano()
	defer next.Release(ctx)
	lost := lostAt.Load()
	if lost == 0 || lost >= handed {
		t.Fatalf("holder's context ended at %d, permit handed on at %d: not before", lost, handed)
	}
	var le *core.LostError
	if cause := context.Cause(p.Context()); !errors.As(cause, &le) || le.Reason != "expired" {
		t.Fatalf("cause %v, want LostError expired", cause)
	}
	t.Logf("context cancelled %v before the permit was handed on", time.Duration(handed-lost))
}

// A waiter whose queue deadline passed (it stopped polling) is skipped by a release and forgotten,
// grant details included; the live waiter behind it gets the permit.
func TestPermits_handoff_expiredWaiterSkipped(t *testing.T) {
	_, rdb, holder := setup(t)
	c := locktest.NewClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "skip", 10*time.Second, core.Permits(1))
	if err != nil {
		t.Fatal(err)
	}
	const gone = "expired-waiter-token"
	goneMember := enqueue(t, rdb, locktest.Key("skip", "permits", "queue"), gone, "1", 10*time.Second, time.Second, time.Now().Add(-2*time.Second))
	got := make(chan *core.Lock, 1)
	go func() {
		p, err := c.Acquire(ctx, "skip", 10*time.Second, core.Permits(1))
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	locktest.Eventually(t, 5*time.Second, "waiter queued", func() bool { return len(queued(t, rdb, locktest.Key("skip", "permits", "queue"))) == 2 })
	_ = h.Release(ctx)
	p := <-got
	defer p.Release(ctx)
	if rdb.ZScore(ctx, locktest.Key("skip", "permits"), gone).Err() == nil {
		t.Fatal("the expired waiter was granted a permit")
	}
	if rdb.ZScore(ctx, locktest.Key("skip", "permits", "queue"), goneMember).Err() == nil {
		t.Fatal("the expired waiter outlived its deadline in the queue")
	}
}
