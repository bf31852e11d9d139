package core_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
)

// Defect 5: fair mode is FIFO across processes with several waiters in one process: a waiter that
// is not first in its own process keeps its place in the Redis-side queue.
func TestSafety_fairFIFO_severalWaitersInOneProcess(t *testing.T) {
	srv, rdb, holder := setup(t)
	opt := core.WithFairWaiterTimeout(300 * time.Millisecond)
	c1 := locktest.NewClient(t, srv.Client(t), opt)
	c2 := locktest.NewClient(t, srv.Client(t), opt)
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
		locktest.Eventually(t, 2*time.Second, who+" queued", func() bool { return rdb.ZCard(ctx, locktest.Key("f", "queue")).Val() == queued })
	}
	wait(c1, "W1", 1)
	wait(c1, "W2", 2)
	wait(c2, "V", 3)
	queue := rdb.ZRange(ctx, locktest.Key("f", "queue"), 0, -1).Val()
	// Four queue timeouts pass: every waiter must keep its place meanwhile.
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if now := rdb.ZRange(ctx, locktest.Key("f", "queue"), 0, -1).Val(); !slices.Equal(now, queue) {
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
	waiter := locktest.NewClient(t, rdb)
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
	locktest.Eventually(t, 5*time.Second, "the next attempt after a PTTL-0 reply", func() bool { return spy.gap() > 0 })
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
