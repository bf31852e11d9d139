package chaos_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// 10 000 waiters on one key in one client: memory stays bounded (measured per waiter), and once the
// holder releases, every waiter is either served (in fence order, one at a time) or times out with
// ErrNotAcquired when its context ends; nothing else goes wrong and every goroutine ends.
func TestLimits_10000Waiters(t *testing.T) {
	const n = 10_000
	srv := redistest.Start(t)
	var parked atomic.Int32
	c := locktest.NewClient(t, srv.Client(t), core.WithHook(core.Hook{
		WaitStart: func(ctx context.Context, _ core.WaitInfo) context.Context { parked.Add(1); return ctx },
	}))
	ctx := context.Background()
	holder, err := locktest.NewClient(t, srv.Client(t)).Acquire(ctx, "hot", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	serve := time.Duration(pick(3, 30)) * time.Second // how long waiters wait after the release
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	type result struct {
		fence  int64
		at     time.Time
		err    error
		waited time.Duration
	}
	results := make(chan result, n)
	wctx, stopWaiting := context.WithCancel(ctx) // cancelled `serve` after the release
	defer stopWaiting()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := c.Do(wctx, "hot", 5*time.Second, func(ctx context.Context) error {
				l, _ := core.FromContext(ctx)
				results <- result{fence: l.Fence(), at: time.Now()}
				return nil
			})
			if err != nil {
				results <- result{err: err, waited: time.Since(start)}
			}
		}()
	}
	locktest.Eventually(t, 30*time.Second, "10 000 waiters to start", func() bool { return parked.Load() == n })
	time.Sleep(200 * time.Millisecond) // let the last ones park (subscribe) before measuring
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	heap := float64(during.HeapAlloc-before.HeapAlloc) / n
	stack := float64(during.StackInuse-before.StackInuse) / n
	srv.ResetStats(t)
	time.Sleep(time.Second) // one second of parked waiters: how much do they cost Redis?
	idle := srv.CommandStats(t)
	t.Logf("per waiter: %.0f B heap, %.0f B stack; Redis commands in 1 s while parked: evalsha %d",
		heap, stack, idle["evalsha"])
	if heap > 8<<10 {
		t.Errorf("%.0f B of heap per waiter", heap)
	}
	rel := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(serve, stopWaiting)
	wg.Wait()
	close(results)
	var served []result
	other := map[string]int{}
	for r := range results {
		switch {
		case r.err == nil:
			served = append(served, r)
		case errors.Is(r.err, core.ErrNotAcquired):
			other["timed out"]++
		default:
			other[r.err.Error()]++
		}
	}
	took := time.Since(rel)
	t.Logf("%d served in %v (%.0f/s), others %v", len(served), took, float64(len(served))/took.Seconds(), other)
	if len(served)+other["timed out"] != n || len(other) > 1 {
		t.Fatalf("served %d, others %v: want every waiter served or timed out", len(served), other)
	}
	slices.SortFunc(served, func(a, b result) int { return a.at.Compare(b.at) })
	for i := 1; i < len(served); i++ {
		if served[i].fence <= served[i-1].fence {
			t.Fatalf("fence %d after %d", served[i].fence, served[i-1].fence)
		}
	}
}
