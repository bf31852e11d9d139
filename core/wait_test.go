package core_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// With a fallback backoff of 5-10 s, a waiter that acquires quickly after the release can only
// have been woken by the release message.
func TestWait_wokenByRelease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	holder := locktest.NewClient(t, srv.Client(t))
	waiter := locktest.NewClient(t, srv.Client(t), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lock, 1)
	go func() {
		w, err := waiter.Acquire(ctx, "k", time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	locktest.Eventually(t, 5*time.Second, "waiter subscribed", func() bool { return subscribers(t, rdb, "k") == 1 })
	released := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-got:
		took := time.Since(released)
		if took > 500*time.Millisecond {
			t.Fatalf("waiter acquired %v after release; the fallback is 5s, so it was not woken", took)
		}
		t.Logf("handoff took %v", took)
		if w != nil {
			_ = w.Release(ctx)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("waiter not woken by the release")
	}
}

// Each release wakes one local waiter, not all of them, and local waiters are served FIFO.
func TestWait_wakesOneFIFO(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	var woken, plain atomic.Int64
	hook := core.Hook{Attempt: func(_ context.Context, in core.WaitInfo) {
		if in.Woken {
			woken.Add(1)
		} else {
			plain.Add(1)
		}
	}}
	holder := locktest.NewClient(t, srv.Client(t))
	c := locktest.NewClient(t, srv.Client(t), core.WithHook(hook), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
		locks = make(chan *core.Lock, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := c.Acquire(ctx, "k", 30*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			locks <- w
		}()
		// Queue them in a known order: wait until this one parked. The first makes two attempts
		// (before and after subscribing); the others queue behind it without an attempt.
		locktest.Eventually(t, 5*time.Second, "waiter parked", func() bool {
			return subscribers(t, rdb, "k") == 1 && core.WaitersParked(c) >= i+1 && plain.Load() == 2
		})
	}
	_ = l.Release(ctx)
	for i := range n {
		w := <-locks
		if got := woken.Load(); got != int64(i+1) {
			t.Fatalf("after %d releases, %d woken attempts: a release woke more than one waiter", i+1, got)
		}
		_ = w.Release(ctx)
	}
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("served in order %v, want FIFO", order)
		}
	}
}

// Fair mode serves waiters of two processes in the order they queued in Redis.
func TestWait_fairAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	holder := locktest.NewClient(t, srv.Client(t))
	a := locktest.NewClient(t, srv.Client(t), core.WithRetryBackoff(time.Second, 2*time.Second))
	b := locktest.NewClient(t, srv.Client(t), core.WithRetryBackoff(time.Second, 2*time.Second))
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "k", 30*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	var (
		mu    sync.Mutex
		order []int
		locks = make(chan *core.Lock, n)
	)
	for i := range n {
		c := a
		if i%2 == 1 {
			c = b
		}
		go func() {
			w, err := c.Acquire(ctx, "k", 30*time.Second, core.Fair())
			if err != nil {
				t.Error(err)
				locks <- nil
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			locks <- w
		}()
		locktest.Eventually(t, 5*time.Second, "waiter queued in redis", func() bool {
			return rdb.ZCard(ctx, locktest.Key("k", "queue")).Val() == int64(i+1)
		})
	}
	_ = l.Release(ctx)
	for range n {
		if w := <-locks; w != nil {
			_ = w.Release(ctx)
		}
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("served in order %v, want queue order", order)
		}
	}
	if n := rdb.ZCard(ctx, locktest.Key("k", "queue")).Val(); n != 0 {
		t.Fatalf("queue left with %d entries", n)
	}
}

// A fair waiter that gives up leaves the queue, and a dead one is skipped after its timeout.
func TestWait_fairWaiterLeavesQueue(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb, core.WithFairWaiterTimeout(200*time.Millisecond))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "k", 30*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	_, err = locktest.NewClient(t, srv.Client(t)).Acquire(ctx, "k", time.Second, core.Fair(), core.WithWait(50*time.Millisecond))
	if !errors.Is(err, core.ErrNotAcquired) {
		t.Fatal(err)
	}
	if n := rdb.ZCard(ctx, locktest.Key("k", "queue")).Val(); n != 0 {
		t.Fatalf("a waiter that gave up is still queued (%d)", n)
	}
	// A dead waiter: queued by hand with a deadline in the past is skipped.
	queueDeadWaiter(t, rdb, locktest.Key("k", "queue"), "dead")
	_ = l.Release(ctx)
	l2, err := c.TryAcquire(ctx, "k", time.Second, core.Fair())
	if err != nil {
		t.Fatalf("dead waiter not skipped: %v", err)
	}
	_ = l2.Release(ctx)
}

func TestClose_wakesParkedWaiters(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	holder := locktest.NewClient(t, srv.Client(t))
	c, err := core.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	errs := make(chan error, 10)
	for range 10 {
		go func() {
			_, err := c.Acquire(ctx, "k", time.Second)
			errs <- err
		}()
	}
	locktest.Eventually(t, 5*time.Second, "waiters parked", func() bool {
		return subscribers(t, rdb, "k") == 1 && core.WaitersParked(c) == 10
	})
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := <-errs; !errors.Is(err, core.ErrClosed) {
			t.Fatalf("parked waiter got %v, want ErrClosed", err)
		}
	}
}

// Every parked duplicate of a guarded call sees the guard as soon as it is set, not after its
// fallback backoff: no release follows a ReleaseSet's wake-up, so each waiter passes it on.
func TestWait_guardedWaitersAllWoken(t *testing.T) {
	srv := redistest.Start(t)
	holder := locktest.NewClient(t, srv.Client(t))
	c := locktest.NewClient(t, srv.Client(t), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx := context.Background()
	const guard = "lockkit:done:{job}"
	l, err := holder.TryAcquire(ctx, "job", 30*time.Second, core.WithGuard(guard))
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := c.Acquire(ctx, "job", time.Second, core.WithGuard(guard))
			errs <- err
		}()
	}
	locktest.Eventually(t, 5*time.Second, "duplicates parked", func() bool { return core.WaitersParked(c) == n })
	set := time.Now()
	if err := l.ReleaseSet(ctx, guard, []byte("done"), time.Minute); err != nil {
		t.Fatal(err)
	}
	for range n {
		select {
		case err := <-errs:
			if !errors.Is(err, core.ErrGuarded) {
				t.Fatalf("duplicate got %v, want ErrGuarded", err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("a duplicate still waits %v after the guard was set (the fallback is 5s+)", time.Since(set))
		}
	}
}

// Only the first waiter polls. When it gives up without the lock, the next takes over polling at
// once: after a silent expiry (no release message) it would otherwise sleep its long fallback.
func TestWait_headGivesUp_nextPolls(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	holder := locktest.NewClient(t, srv.Client(t))
	var attempts atomic.Int32
	c := locktest.NewClient(t, srv.Client(t), core.WithRetryBackoff(time.Second, 2*time.Second),
		core.WithHook(core.Hook{Attempt: func(context.Context, core.WaitInfo) { attempts.Add(1) }}))
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	headErr := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, "k", time.Second, core.WithWait(300*time.Millisecond))
		headErr <- err
	}()
	// Parked after its second attempt, the one it makes once subscribed (a slow subscription on a
	// loaded host let the lock vanish before it, and the head took it).
	locktest.Eventually(t, 5*time.Second, "head parked", func() bool { return attempts.Load() == 2 && core.WaitersParked(c) == 1 })
	got := make(chan error, 1)
	go func() {
		w, err := c.Acquire(ctx, "k", time.Second)
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	locktest.Eventually(t, 5*time.Second, "second parked", func() bool { return core.WaitersParked(c) == 2 })
	rdb.Del(ctx, l.Key()) // the holder's lock vanishes without a release message (as on expiry)
	if err := <-headErr; !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("head: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the next waiter did not take over polling (its own fallback is 20s)")
	}
}

// queueDeadWaiter queues, by hand, a fair waiter whose deadline passed long ago (see internal/script/lua/queue.lua).
func queueDeadWaiter(t testing.TB, rdb *redis.Client, queue, token string) {
	t.Helper()
	epoch := time.Now().Add(-time.Minute).UnixMicro()
	member := "1000\x00100\x00" + token + "\x000\x00host 1 dead"
	if err := rdb.ZAdd(context.Background(), queue, redis.Z{Score: float64(2 * epoch), Member: member}).Err(); err != nil {
		t.Fatal(err)
	}
}
