package core_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// Defect 5: fair mode is FIFO across processes with several waiters in one process: a waiter that
// is not first in its own process keeps its place in the Redis-side queue.
func TestSafety_fairFIFO_severalWaitersInOneProcess(t *testing.T) {
	srv, rdb, holder := setup(t)
	opt := core.WithFairWaiterTimeout(300 * time.Millisecond)
	c1 := newClient(t, srv.Client(t), opt)
	c2 := newClient(t, srv.Client(t), opt)
	ctx := context.Background()
	h, err := holder.Acquire(ctx, "f", 10*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	wait := func(c *core.Client, who string, queued int64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(ctx, "f", 5*time.Second, core.Fair())
			if err != nil {
				t.Errorf("%s: %v", who, err)
				return
			}
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
			_ = l.Release(ctx)
		}()
		eventually(t, 2*time.Second, who+" queued", func() bool { return rdb.ZCard(ctx, "lockkit:{f}:queue").Val() == queued })
	}
	wait(c1, "W1", 1)
	wait(c1, "W2", 2)
	wait(c2, "V", 3)
	queue := rdb.ZRange(ctx, "lockkit:{f}:queue", 0, -1).Val()
	// Four queue timeouts pass: every waiter must keep its place meanwhile.
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if now := rdb.ZRange(ctx, "lockkit:{f}:queue", 0, -1).Val(); !slices.Equal(now, queue) {
			t.Fatalf("the fair queue changed while every waiter was alive: %d entries, was %d", len(now), len(queue))
		}
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if want := []string{"W1", "W2", "V"}; !slices.Equal(order, want) {
		t.Fatalf("served %v, want %v", order, want)
	}
}

// Defect 12: a waiter whose attempt finds the holder in its last millisecond (PTTL 0) tries again
// at once, not after its grown backoff.
func TestSafety_expiringHolder_takenOverPromptly(t *testing.T) {
	srv, _, holder := setup(t)
	spy := &lastMillisecond{at: 5}
	rdb := srv.Client(t)
	rdb.AddHook(spy)
	waiter := newClient(t, rdb)
	ctx := context.Background()
	h, err := holder.Acquire(ctx, "x", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "x", time.Second, core.WithWait(5*time.Second))
		if err == nil {
			_ = l.Release(ctx)
		}
		done <- err
	}()
	eventually(t, 5*time.Second, "the next attempt after a PTTL-0 reply", func() bool { return spy.gap() > 0 })
	if gap := spy.gap(); gap > 40*time.Millisecond {
		t.Fatalf("after a reply of PTTL 0 the waiter tried again only %v later", gap)
	}
	_ = h.Release(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// lastMillisecond answers the at-th acquire attempt as if the holder had under a millisecond left
// (what Redis answers in a lock's last millisecond), and measures how long until the next attempt.
type lastMillisecond struct {
	at     int
	mu     sync.Mutex
	n      int
	zeroAt time.Time
	next   time.Duration
}

func (s *lastMillisecond) gap() time.Duration { s.mu.Lock(); defer s.mu.Unlock(); return s.next }

func (s *lastMillisecond) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *lastMillisecond) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c, ok := cmd.(*redis.Cmd)
		if !ok || err != nil || len(cmd.Name()) < 4 || cmd.Name()[:4] != "eval" {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.n++
		switch {
		case s.n == s.at:
			if v, _ := c.Int64(); v < 0 {
				c.SetVal(int64(-1)) // busy, PTTL 0
				s.zeroAt = time.Now()
			}
		case !s.zeroAt.IsZero() && s.next == 0:
			s.next = time.Since(s.zeroAt)
		}
		return err
	}
}
func (s *lastMillisecond) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
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
	if pttl := rdb.PTTL(ctx, "lockkit:{x}").Val(); pttl <= 0 {
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
	if st := lockState(t, rdb, "lockkit:{x}"); st.Held() || st.Fence != f1 {
		t.Fatalf("released lock: %+v, want free with fence %d", st, f1)
	}
	if pttl := rdb.PTTL(ctx, "lockkit:{x}").Val(); pttl <= 0 {
		t.Fatalf("free lock PTTL %v: it must expire", pttl)
	}
	rdb.PExpire(ctx, "lockkit:{x}", 5*time.Millisecond)
	eventually(t, time.Second, "the free lock to expire", func() bool { return rdb.Exists(ctx, "lockkit:{x}").Val() == 0 })
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
	other := newClient(t, srv.Client(t))
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
	eventually(t, 2*time.Second, "a fair waiter queued", func() bool { return rdb.Exists(ctx, "lockkit:{f}:queue").Val() == 1 })
	g, _ := c.Acquire(ctx, "g", time.Second, core.WithGuard("lockkit:{g}:done"))
	_ = a.Extend(ctx, 3*time.Second)
	check("while held")
	_ = g.ReleaseSet(ctx, "lockkit:{g}:done", []byte("ok"), time.Minute)
	for _, l := range []*core.Lock{in, co, a, f} {
		_ = l.Release(ctx)
	}
	eventually(t, 3*time.Second, "the fair waiter served", queued.Load)
	check("after release")
	if n := len(rdb.Keys(ctx, "lockkit:{a}*").Val()); n == 0 {
		t.Fatal("no key left to check: the test proves nothing")
	}
}
