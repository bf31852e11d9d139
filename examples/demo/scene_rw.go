package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core"
)

// sceneReadWrite: two replicas read and write one catalog under its read-write lock (core.Read,
// core.Write). Eight requests arrive in turn — read, read, write, read, read, write, read, read —
// each queued in Redis before the next one is sent: the readers at the head share the lock, a
// writer runs alone, and the readers that come after a waiting writer wait behind it (first come,
// first served, so a stream of readers cannot starve a writer). The fallback retry is set to a
// second or more, so every hand-over comes from a release.
func sceneReadWrite(ctx context.Context, s *scene) error {
	const (
		name    = "catalog"
		ttl     = 5 * time.Second
		work    = 150 * time.Millisecond
		backoff = 2 * time.Second
	)
	order := []bool{false, false, true, false, false, true, false, false} // true: a write
	var clients []*core.Client
	for range 2 {
		c, _, err := s.newLocks(core.WithRetryBackoff(backoff, 2*backoff))
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	s.logf("%d requests on the read-write lock %q over 2 replicas, sent in turn: R R W R R W R R; each works %v",
		len(order), name, work)
	var (
		mu sync.Mutex
		iv []interval
	)
	t0 := time.Now()
	var wg sync.WaitGroup
	var done atomic.Int64 // requests whose Do returned (their hold is gone from Redis)
	errs := make(chan error, len(order))
	for j, write := range order {
		side, mode := "read", core.Read()
		if write {
			side, mode = "write", core.Write()
		}
		wg.Go(func() {
			r := j % 2
			jctx, span := s.tracing.tracer.Start(ctx, fmt.Sprintf("%s %d", side, j+1))
			defer span.End()
			err := clients[r].Do(jctx, name, ttl, func(hctx context.Context) error {
				h, _ := core.FromContext(hctx)
				start := time.Now()
				ok := sleep(hctx, work)
				mu.Lock()
				iv = append(iv, interval{label: fmt.Sprintf("%s %d on rep. %d", side, j+1, r+1), key: side, start: start,
					end: time.Now(), fence: h.Fence()})
				mu.Unlock()
				if !ok {
					return context.Cause(hctx)
				}
				return nil
			}, mode)
			done.Add(1)
			if err != nil {
				errs <- fmt.Errorf("%s %d: %w", side, j+1, err)
			}
		})
		// The next request is sent once this one holds or is queued in Redis (or already ran, on
		// a slow machine): arrival order.
		if err := waitPresent(ctx, clients[0], name, j+1, done.Load); err != nil {
			return err
		}
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(slices.Collect(chanSeq(errs))...); err != nil {
		return err
	}
	slices.SortFunc(iv, func(a, b interval) int { return a.start.Compare(b.start) })
	s.timeline(t0, iv)
	s.check(len(iv) == len(order), "all %d requests ran", len(iv))
	alone, peak := true, 0
	for i, x := range iv {
		together := 0
		for k, y := range iv {
			if k != i && y.start.Before(x.end) && x.start.Before(y.end) {
				together++
				alone = alone && x.key == "read" && y.key == "read"
			}
		}
		peak = max(peak, together+1)
	}
	s.check(alone, "a writer never ran with anyone; readers ran only with readers")
	s.check(peak == 2, "readers shared the lock: %d ran at once", peak)
	var sides []string
	for _, x := range iv {
		sides = append(sides, x.key[:1])
	}
	s.check(slices.Equal(sides, []string{"r", "r", "w", "r", "r", "w", "r", "r"}),
		"served in arrival order: %v (the readers sent after a waiting writer ran after it)", sides)
	ordered := true
	for _, w := range iv {
		if w.key != "write" {
			continue
		}
		for _, x := range iv {
			ordered = ordered && (x == w || x.start.Before(w.start) == (x.fence < w.fence))
		}
	}
	s.check(ordered, "fences order every hold around each writer (lower before it, higher after it)")
	firstEnd := iv[0].end
	for _, x := range iv {
		if x.end.Before(firstEnd) {
			firstEnd = x.end
		}
	}
	// The bound is the fallback retry's earliest (backoff/2): a start before it came from a release.
	waited, handed := 0, 0
	var slowest time.Duration
	for _, x := range iv {
		if x.start.Before(firstEnd) {
			continue // the first readers took the free lock (before anyone released it)
		}
		waited++
		gap := time.Duration(-1)
		for _, y := range iv {
			if d := x.start.Sub(y.end); d >= 0 && (gap < 0 || d < gap) {
				gap = d
			}
		}
		if gap >= 0 && gap < backoff/2 {
			handed++
			slowest = max(slowest, gap)
		}
	}
	s.check(waited > 0 && handed == waited,
		"%d/%d waiting requests started after a release, before the fallback retry (%v) could move them (handed on in Redis; slowest %v after the release)",
		handed, waited, backoff/2, slowest.Round(100*time.Microsecond))
	return nil
}

// waitPresent waits until n requests are holding or queued on the read-write lock name in Redis,
// or have finished (ended counts those; it is read before Redis, so that a request that finishes
// in between is counted by neither, never by both).
func waitPresent(ctx context.Context, c *core.Client, name string, n int, ended func() int64) error {
	for {
		gone := int(ended())
		info, err := c.Inspect(ctx, name)
		if err != nil {
			return err
		}
		held := len(info.Readers) + info.RWQueued
		if info.Writer != nil {
			held++
		}
		if held+gone >= n {
			return nil
		}
		if !sleep(ctx, time.Millisecond) {
			return context.Cause(ctx)
		}
	}
}
