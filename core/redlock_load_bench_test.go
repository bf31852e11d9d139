package core_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
)

// BenchmarkRedlockSections measures critical sections per second over a 5-node Redlock with the
// default node timeout and a 1 s TTL (TTL/20 = 50 ms): 8 goroutines take 2 names with Do (as the
// chaos suite's Redlock scenario does, without its faults). Run it beside CPU-bound loops to see
// what a loaded host does to Redlock (issue #44):
//
//	go test -race -run '^$' -bench RedlockSections -benchtime 400x ./core/
//
// "unavailable/op" is the share of calls that failed without a quorum; "notacquired/op", of calls
// whose wait ended first.
func BenchmarkRedlockSections(b *testing.B) {
	c := redlockClient(b, redistest.StartN(b, 5))
	ctx := context.Background()
	var next, done, unavailable, busy atomic.Int64
	var other error
	var mu sync.Mutex
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range 8 {
		wg.Go(func() {
			name := "s" + strconv.Itoa(w%2)
			for next.Add(1) <= int64(b.N) {
				err := c.Do(ctx, name, time.Second, func(context.Context) error { return nil }, core.WithWait(3*time.Second))
				switch {
				case err == nil:
					done.Add(1)
				case errors.Is(err, core.ErrUnavailable):
					unavailable.Add(1)
					time.Sleep(20 * time.Millisecond) // as the chaos workers back off
				case errors.Is(err, core.ErrNotAcquired):
					busy.Add(1)
				default:
					mu.Lock()
					other = err
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if other != nil {
		b.Fatal(other)
	}
	b.ReportMetric(float64(done.Load())/elapsed.Seconds(), "sections/s")
	b.ReportMetric(float64(unavailable.Load())/float64(b.N), "unavailable/op")
	b.ReportMetric(float64(busy.Load())/float64(b.N), "notacquired/op")
}
