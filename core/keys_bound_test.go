package core_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// A service that locks a new name per request (the adapters do, per idempotency key and per task
// key) leaves nothing behind in Redis: after 10 000 distinct names, and the retention of the
// longest-lived key (the fence counter: 10s after the last acquisition), lockkit's key count is
// back at 0. (10 000 names show what 100 000 did, in a fraction of the time: the 10 s retention
// is most of the test.)
func TestKeys_10000Names_leaveNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("drives 10 000 names and waits for their retention (~12s)")
	}
	_, rdb, c := setup(t)
	ctx := context.Background()
	const names, workers = 10_000, 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < names; i += workers {
				l, err := c.TryAcquire(ctx, "req/"+strconv.Itoa(i), time.Second)
				if err != nil {
					errs <- err
					return
				}
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	peak := rdb.DBSize(ctx).Val()
	if peak < 1000 { // one free lock per name, until they expire (the first ones may have)
		t.Fatalf("%d keys right after %d names: the test proves nothing", peak, names)
	}
	locktest.Eventually(t, 30*time.Second, "every key to expire", func() bool { return rdb.DBSize(ctx).Val() == 0 })
	t.Logf("%d names: %d keys right after, 0 after retention", names, peak)
}

// The lock's key keeps its fence while held and for a while after its release; both ways it
// expires, and fences keep increasing once it is gone (the server's clock floors them).
func TestFence_keyExpiry_fencesStillIncrease(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f1 := l.Fence()
	if pttl := rdb.PTTL(ctx, locktest.Key("x")).Val(); pttl <= 0 {
		t.Fatalf("held lock PTTL %v: it must expire", pttl)
	}
	in, err := c.Acquire(l.Context(), "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if in.Fence() != f1 {
		t.Fatalf("re-entry answered fence %d, want the hold's %d", in.Fence(), f1)
	}
	_ = in.Release(ctx)
	_ = l.Release(ctx)
	if st := lockState(t, rdb, locktest.Key("x")); st.Held() || st.Fence != f1 {
		t.Fatalf("released lock: %+v, want free with fence %d", st, f1)
	}
	if pttl := rdb.PTTL(ctx, locktest.Key("x")).Val(); pttl <= 0 {
		t.Fatalf("free lock PTTL %v: it must expire", pttl)
	}
	rdb.PExpire(ctx, locktest.Key("x"), 5*time.Millisecond)
	locktest.Eventually(t, time.Second, "the free lock to expire", func() bool { return rdb.Exists(ctx, locktest.Key("x")).Val() == 0 })
	l2, err := c.Acquire(ctx, "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= f1 {
		t.Fatalf("fence after the key expired: %d, not above %d", l2.Fence(), f1)
	}
	_ = l2.Release(ctx)
}

// Every key lockkit writes carries a TTL, whatever the path that wrote it.
func TestKeys_everyKeyExpires(t *testing.T) {
	srv, rdb, c := setup(t)
	other := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	check := func(when string) {
		t.Helper()
		keys, err := rdb.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if pttl := rdb.PTTL(ctx, k).Val(); pttl < 0 {
				t.Errorf("%s: key %q has no TTL (%v)", when, k, pttl)
			}
		}
	}
	a, _ := c.Acquire(ctx, "a", time.Second)
	in, _ := c.Acquire(a.Context(), "a", 2*time.Second)
	co, _ := other.Acquire(ctx, "a", time.Second, core.WithOwner(a.Token()))
	f, _ := c.Acquire(ctx, "f", time.Second, core.Fair())
	var queued atomic.Bool
	go func() {
		l, err := other.Acquire(ctx, "f", time.Second, core.Fair(), core.WithWait(3*time.Second))
		if err == nil {
			queued.Store(true)
			_ = l.Release(ctx)
		}
	}()
	locktest.Eventually(t, 2*time.Second, "a fair waiter queued", func() bool { return rdb.Exists(ctx, locktest.Key("f", "queue")).Val() == 1 })
	g, _ := c.Acquire(ctx, "g", time.Second, core.WithGuard(locktest.Key("g", "done")))
	_ = a.Extend(ctx, 3*time.Second)
	check("while held")
	_ = g.ReleaseSet(ctx, locktest.Key("g", "done"), []byte("ok"), time.Minute)
	for _, l := range []*core.Lock{in, co, a, f} {
		_ = l.Release(ctx)
	}
	locktest.Eventually(t, 3*time.Second, "the fair waiter served", queued.Load)
	check("after release")
	if n := len(rdb.Keys(ctx, "lockkit:{a}*").Val()); n == 0 {
		t.Fatal("no key left to check: the test proves nothing")
	}
}
