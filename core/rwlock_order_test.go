package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
)

// rwGot is the outcome of a background acquisition.
type rwGot struct {
	l   *core.Lock
	err error
}

// rwWaiter starts Acquire of the read-write lock name in the background and waits until it is
// queued in Redis (the queue holds n waiters then).
func rwWaiter(t *testing.T, ctx context.Context, c *core.Client, rdb *redis.Client, name string, mode core.AcquireOption, n int64) <-chan rwGot {
	t.Helper()
	got := make(chan rwGot, 1)
	go func() {
		l, err := c.Acquire(ctx, name, 10*time.Second, mode)
		got <- rwGot{l, err}
	}()
	locktest.Eventually(t, 5*time.Second, "waiter queued", func() bool {
		return rdb.ZCard(ctx, locktest.Key(name, "rw", "queue")).Val() == n
	})
	return got
}

// waitGot returns the waiter's hold, failing the test if it did not get one within d.
func waitGot(t *testing.T, got <-chan rwGot, d time.Duration, what string) *core.Lock {
	t.Helper()
	select {
	case g := <-got:
		if g.err != nil {
			t.Fatalf("%s: %v", what, g.err)
		}
		return g.l
	case <-time.After(d):
		t.Fatalf("%s: not granted within %v", what, d)
		return nil
	}
}

// notGot fails the test if the waiter got the lock (it must still wait).
func notGot(t *testing.T, got <-chan rwGot, what string) {
	t.Helper()
	select {
	case g := <-got:
		t.Fatalf("%s: got %v (err %v) while it must wait", what, g.l.Mode(), g.err)
	default:
	}
}

// FIFO across readers and writers: a writer queued behind a reader holds back the readers that
// come after it (TryAcquire too), a release hands the lock to the writer at the head, and the
// writer's release hands it to every reader at the head up to the next writer, each with a fence
// above the hold before it. The waiters poll only every 5 s: the grants come with the releases.
func TestRW_fifo_writerHoldsBackLaterReaders(t *testing.T) {
	srv, rdb, a := setup(t)
	slow := core.WithRetryBackoff(5*time.Second, 10*time.Second)
	b, c := locktest.NewClient(t, srv.Client(t), slow), locktest.NewClient(t, srv.Client(t), slow)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r0, err := a.Acquire(ctx, "doc", 10*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	w1 := rwWaiter(t, ctx, b, rdb, "doc", core.Write(), 1)
	if _, err := c.TryAcquire(ctx, "doc", time.Second, core.Read()); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a reader behind a queued writer: %v, want ErrNotAcquired", err)
	}
	r1 := rwWaiter(t, ctx, c, rdb, "doc", core.Read(), 2)
	r2 := rwWaiter(t, ctx, a, rdb, "doc", core.Read(), 3)
	w2 := rwWaiter(t, ctx, c, rdb, "doc", core.Write(), 4)
	r3 := rwWaiter(t, ctx, b, rdb, "doc", core.Read(), 5)
	notGot(t, w1, "writer behind a reader")
	released := time.Now()
	if err := r0.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := waitGot(t, w1, 2*time.Second, "the writer at the head")
	t.Logf("writer granted %v after the reader's release", time.Since(released).Round(time.Millisecond))
	if w.Fence() <= r0.Fence() {
		t.Fatalf("writer's fence %d not above the reader's %d", w.Fence(), r0.Fence())
	}
	notGot(t, r1, "reader behind the writer")
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g1, g2 := waitGot(t, r1, 2*time.Second, "first reader"), waitGot(t, r2, 2*time.Second, "second reader")
	if g1.Fence() <= w.Fence() || g2.Fence() <= w.Fence() {
		t.Fatalf("readers' fences %d, %d not above the writer's %d", g1.Fence(), g2.Fence(), w.Fence())
	}
	notGot(t, w2, "second writer")
	notGot(t, r3, "reader behind the second writer")
	_ = g1.Release(ctx)
	notGot(t, w2, "second writer while a reader holds")
	_ = g2.Release(ctx)
	v := waitGot(t, w2, 2*time.Second, "second writer")
	notGot(t, r3, "reader behind the second writer")
	_ = v.Release(ctx)
	last := waitGot(t, r3, 2*time.Second, "last reader")
	if last.Fence() <= v.Fence() || v.Fence() <= g2.Fence() {
		t.Fatalf("fences %d, %d, %d: not increasing in grant order", g2.Fence(), v.Fence(), last.Fence())
	}
	_ = last.Release(ctx)
	if n := rdb.Exists(ctx, locktest.Key("doc", "rw"), locktest.Key("doc", "rw", "queue")).Val(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// A writer at the head that gives up lets the readers behind it in at once, while readers hold
// (they poll only every 0.8 to 1.6 s).
func TestRW_writerGivesUp_readersBehindGranted(t *testing.T) {
	srv, rdb, a := setup(t)
	slow := core.WithRetryBackoff(5*time.Second, 10*time.Second)
	b, c := locktest.NewClient(t, srv.Client(t), slow), locktest.NewClient(t, srv.Client(t), slow)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r0, err := a.Acquire(ctx, "doc", 10*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	defer r0.Release(ctx)
	wctx, giveUp := context.WithCancel(ctx)
	w := rwWaiter(t, wctx, b, rdb, "doc", core.Write(), 1)
	r := rwWaiter(t, ctx, c, rdb, "doc", core.Read(), 2) // (another Client: no local hand-over)
	locktest.Eventually(t, 5*time.Second, "the reader's attempt after subscribing", func() bool {
		z := rdb.ZRangeWithScores(ctx, locktest.Key("doc", "rw", "queue"), 1, 1).Val()
		return len(z) == 1 && int64(z[0].Score)%2 == 1 // (it refreshed its place: queue.lua)
	})
	gaveUp := time.Now()
	giveUp()
	if g := <-w; !errors.Is(g.err, core.ErrNotAcquired) || !errors.Is(g.err, context.Canceled) {
		t.Fatalf("writer that gave up: %v", g.err)
	}
	g := waitGot(t, r, 500*time.Millisecond, "reader behind the writer that gave up") // (its poll: 0.8 s or later)
	t.Logf("reader granted %v after the writer gave up", time.Since(gaveUp).Round(time.Millisecond))
	_ = g.Release(ctx)
}

// ForceRelease frees a writer; the head reader's attempt (woken by the force release) takes the
// lock and hands it on to the readers behind it in the same script: they hold at once, although
// they poll only every 1.6 s.
func TestRW_forceRelease_readersGrantedTogether(t *testing.T) {
	srv, rdb, a := setup(t)
	slow := core.WithRetryBackoff(5*time.Second, 10*time.Second)
	b, c := locktest.NewClient(t, srv.Client(t), slow), locktest.NewClient(t, srv.Client(t), slow)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := a.TryAcquire(ctx, "doc", 3*time.Second, core.Write())
	if err != nil {
		t.Fatal(err)
	}
	r1 := rwWaiter(t, ctx, c, rdb, "doc", core.Read(), 1)
	r2 := rwWaiter(t, ctx, b, rdb, "doc", core.Read(), 2)
	r3 := rwWaiter(t, ctx, b, rdb, "doc", core.Read(), 3)
	info, err := a.Inspect(ctx, "doc")
	if err != nil || info.Writer == nil || info.Writer.Fence != w.Fence() || len(info.Readers) != 0 || info.RWQueued != 3 || !info.Held || info.Mode != "write" {
		t.Fatalf("inspect: %+v %v", info, err)
	}
	forced := time.Now()
	if ok, err := a.ForceRelease(ctx, "doc"); !ok || err != nil {
		t.Fatalf("force release: %v %v", ok, err)
	}
	for i, r := range []<-chan rwGot{r1, r2, r3} {
		g := waitGot(t, r, 500*time.Millisecond, "reader")
		t.Logf("reader %d granted %v after the force release", i+1, time.Since(forced).Round(time.Millisecond))
		defer g.Release(ctx)
	}
	info, err = a.Inspect(ctx, "doc")
	if err != nil || info.Writer != nil || len(info.Readers) != 3 || info.RWQueued != 0 {
		t.Fatalf("inspect: %+v %v", info, err)
	}
	for _, h := range info.Readers {
		if h.Fence <= w.Fence() || h.TTL <= 9*time.Second || h.Holds != 1 || h.PID == 0 {
			t.Fatalf("reader %+v", h)
		}
	}
	locktest.Eventually(t, 10*time.Second, "the writer hears its loss", func() bool { return w.Context().Err() != nil })
	var le *core.LostError
	if !errors.As(context.Cause(w.Context()), &le) || le.Reason != "not_owner" {
		t.Fatalf("writer's cause %v", context.Cause(w.Context()))
	}
}
