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
	"github.com/redis/go-redis/v9"
)

// A release hands its permit to one parked waiter (no herd), through the release channel: the
// fallback poll is a second or more here, so only the message can explain a quick acquisition; and
// the waiter holds without another attempt (direct handoff: the release granted it the permit).
func TestPermits_releaseWakesOneWaiter(t *testing.T) {
	_, rdb, holder := setup(t)
	var wokenFailed, acquiredByAttempt atomic.Int64
	hook := core.Hook{Attempt: func(_ context.Context, w core.WaitInfo) {
		if w.Woken && !w.Acquired {
			wokenFailed.Add(1)
		}
		if w.Acquired {
			acquiredByAttempt.Add(1)
		}
	}}
	waiters := locktest.NewClient(t, rdb, core.WithRetryBackoff(10*time.Second, 10*time.Second), core.WithHook(hook))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var held []*core.Lock
	for range 2 {
		p, err := holder.Acquire(ctx, "wake", 30*time.Second, core.Permits(2))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	const n = 6
	got := make(chan *core.Lock, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := waiters.Acquire(ctx, "wake", 30*time.Second, core.Permits(2))
			if err != nil {
				t.Error(err)
				return
			}
			got <- p
		}()
	}
	locktest.Eventually(t, 5*time.Second, "waiters parked", func() bool { return core.WaitersParked(waiters) == n })
	locktest.Eventually(t, 5*time.Second, "subscribed", func() bool {
		return rdb.PubSubNumSub(ctx, locktest.Key("wake", "permits", "released")).Val()[locktest.Key("wake", "permits", "released")] == 1
	})
	released := time.Now()
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	p := <-got
	t.Logf("woken and acquired %v after the release", time.Since(released).Round(time.Microsecond))
	if d := time.Since(released); d > time.Second {
		t.Fatalf("acquired %v after the release: not woken by it", d)
	}
	// Each release hands its permit to the next waiter: no woken attempt finds the permits taken
	// (a herd would), and the waiters take their permits without an attempt. (A waiter's poll may
	// cross a grant made for it and answer it: at most one here.)
	_ = held[1].Release(ctx)
	_ = p.Release(ctx)
	for range n - 1 {
		_ = (<-got).Release(ctx)
	}
	wg.Wait()
	if wokenFailed.Load() != 0 || acquiredByAttempt.Load() > 1 {
		t.Fatalf("%d woken attempts failed, %d permits taken by an attempt; want 0 and 0 (handed on by the releases)", wokenFailed.Load(), acquiredByAttempt.Load())
	}
}

// Fair: waiters of two Clients get permits in the order they arrived.
func TestPermits_fairOrderAcrossClients(t *testing.T) {
	srv, rdb, holder := setup(t)
	clients := []*core.Client{locktest.NewClient(t, srv.Client(t)), locktest.NewClient(t, srv.Client(t))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var held []*core.Lock
	for range 2 {
		p, err := holder.Acquire(ctx, "fair", 30*time.Second, core.Permits(2), core.Fair())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	const n = 6
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := clients[i%2].Acquire(ctx, "fair", 30*time.Second, core.Permits(2), core.Fair())
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			time.Sleep(5 * time.Millisecond)
			_ = p.Release(ctx)
		}()
		locktest.Eventually(t, 5*time.Second, "queued", func() bool {
			return int64(len(queued(t, rdb, locktest.Key("fair", "permits", "queue")))) == int64(i+1)
		})
	}
	for _, p := range held {
		_ = p.Release(ctx)
	}
	wg.Wait()
	close(order)
	// Two permits: the first two queued go together, then each release admits the next.
	var got []int
	for i := range order {
		got = append(got, i)
	}
	for i, v := range got {
		if v/2 != i/2 {
			t.Fatalf("order %v, want FIFO (pairs in arrival order)", got)
		}
	}
}

func TestPermits_cluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	a := locktest.NewClient(t, cl.Client(t))
	b := locktest.NewClient(t, cl.Client(t), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name := range namesOnEveryMaster(t, cl) {
		var held []*core.Lock
		for range 3 {
			p, err := a.Acquire(ctx, name, 10*time.Second, core.Permits(3))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, p)
		}
		got := make(chan error, 1)
		go func() {
			p, err := b.Acquire(ctx, name, time.Second, core.Permits(3))
			if err == nil {
				err = p.Release(ctx)
			}
			got <- err
		}()
		locktest.Eventually(t, 5*time.Second, "parked", func() bool { return core.WaitersParked(b) == 1 })
		time.Sleep(50 * time.Millisecond) // the SSUBSCRIBE is on its way; a miss costs the 5s fallback
		released := time.Now()
		_ = held[0].Release(ctx)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: woken %v after the release", name, time.Since(released).Round(time.Millisecond))
		for _, p := range held[1:] {
			_ = p.Release(ctx)
		}
	}
}

// Through a Sentinel failover client: permits held across a failover keep being renewed on the
// new master, and a waiter is woken by a release.
func TestPermits_sentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	holder := locktest.NewClient(t, s.Client(t))
	waiter := locktest.NewClient(t, s.Client(t), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var held []*core.Lock
	for range 2 {
		p, err := holder.Acquire(ctx, "job", 2*time.Second, core.Permits(2))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	got := make(chan error, 1)
	go func() {
		p, err := waiter.Acquire(ctx, "job", time.Second, core.Permits(2))
		if err == nil {
			err = p.Release(ctx)
		}
		got <- err
	}()
	locktest.Eventually(t, 5*time.Second, "waiter parked", func() bool { return core.WaitersParked(waiter) == 1 })
	_, replica := s.Servers()
	locktest.Eventually(t, 5*time.Second, "permits replicated", func() bool {
		return replica.Do(t, "ZCARD", locktest.Key("job", "permits")) == int64(2)
	})
	s.Failover(t)
	locktest.Eventually(t, 5*time.Second, "holder renewing on the new master", func() bool {
		d, err := held[0].TTL(ctx)
		return err == nil && d > time.Second
	})
	for _, p := range held {
		if p.Context().Err() != nil {
			t.Fatalf("permit lost across a clean failover: %v", context.Cause(p.Context()))
		}
	}
	released := time.Now()
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(released); took > 2*time.Second {
		t.Fatalf("woken %v after the release; the fallback is 5s", took)
	}
	_ = held[1].Release(ctx)
}

// A fair waiter that gives up while a freed permit is meant for it hands the turn to the next
// waiter at once, instead of leaving the permit idle until that waiter's next poll.
func TestPermits_fairWaiterGivesUp_nextWoken(t *testing.T) {
	srv, rdb, holder := setup(t)
	slow := redis.NewClient(srv.StartDelayProxy(t, 300*time.Millisecond).Options())
	t.Cleanup(func() { slow.Close() })
	// W1 sees everything 300ms late; W2 polls only every 5s or more.
	w1c := locktest.NewClient(t, slow)
	w2c := locktest.NewClient(t, rdb, core.WithRetryBackoff(5*time.Second, 10*time.Second), core.WithFairWaiterTimeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Two permits, both held: a release frees one while the other stays taken.
	h, err := holder.Acquire(ctx, "turn", 10*time.Second, core.Permits(2), core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	other, err := holder.Acquire(ctx, "turn", 10*time.Second, core.Permits(2), core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	ctx1, cancel1 := context.WithCancel(ctx)
	w1 := make(chan error, 1)
	go func() {
		_, err := w1c.Acquire(ctx1, "turn", 10*time.Second, core.Permits(2), core.Fair())
		w1 <- err
	}()
	locktest.Eventually(t, 5*time.Second, "W1 queued", func() bool { return int64(len(queued(t, rdb, locktest.Key("turn", "permits", "queue")))) == 1 })
	w2 := make(chan *core.Lock, 1)
	go func() {
		p, err := w2c.Acquire(ctx, "turn", 10*time.Second, core.Permits(2), core.Fair())
		if err != nil {
			t.Error(err)
		}
		w2 <- p
	}()
	locktest.Eventually(t, 5*time.Second, "W2 queued", func() bool { return int64(len(queued(t, rdb, locktest.Key("turn", "permits", "queue")))) == 2 })
	locktest.Eventually(t, 5*time.Second, "W2 parked", func() bool { return core.WaitersParked(w2c) == 1 })
	released := time.Now()
	if err := h.Release(ctx); err != nil { // names W1, whose process hears it 300ms late
		t.Fatal(err)
	}
	cancel1() // W1 gives up first
	if err := <-w1; err == nil {
		t.Fatal("W1 acquired although it gave up")
	}
	p := <-w2
	took := time.Since(released)
	t.Logf("W2 got the permit %v after the release", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Fatalf("W2 got the permit %v after the release: not woken when W1 gave up", took)
	}
	_ = p.Release(ctx)
}
