package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
)

// scenePermits: two replicas run eight exports of one tenant, at most three at once (a semaphore:
// core.Permits(3)). Each export takes one of the three permits for its run; the others wait and
// are woken, one per freed permit, by the releases (the fallback retry is set to a second or more,
// so a quick hand-over can only come from the wake).
func scenePermits(ctx context.Context, s *scene) error {
	const (
		name    = "exports/tenant-7"
		limit   = 3
		jobs    = 8
		ttl     = 5 * time.Second
		work    = 120 * time.Millisecond
		backoff = 2 * time.Second // fallback retry ≥ backoff/2: a quick start can only come from a release
	)
	var (
		mu           sync.Mutex
		inside, peak int
		iv           []interval
	)
	var clients []*core.Client
	for range 2 {
		c, _, err := s.newLocks(core.WithRetryBackoff(backoff, 2*backoff))
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	s.logf("%d exports of one tenant over 2 replicas, at most %d at once (core.Permits(%d)); each works %v",
		jobs, limit, limit, work)
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	for j := range jobs {
		wg.Go(func() {
			r := j % 2
			jctx, span := s.tracing.tracer.Start(ctx, fmt.Sprintf("export %d", j+1))
			defer span.End()
			err := clients[r].Do(jctx, name, ttl, func(pctx context.Context) error {
				p, _ := core.FromContext(pctx)
				start := time.Now()
				mu.Lock()
				inside++
				peak = max(peak, inside)
				mu.Unlock()
				ok := sleep(pctx, work)
				mu.Lock()
				inside--
				iv = append(iv, interval{label: fmt.Sprintf("export %d on rep. %d", j+1, r+1), start: start, end: time.Now(), fence: p.Fence()})
				mu.Unlock()
				if !ok {
					return context.Cause(pctx)
				}
				return nil
			}, core.Permits(limit))
			if err != nil {
				errs <- fmt.Errorf("export %d: %w", j+1, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(slices.Collect(chanSeq(errs))...); err != nil {
		return err
	}
	slices.SortFunc(iv, func(a, b interval) int { return a.start.Compare(b.start) })
	s.timeline(t0, iv)
	s.check(len(iv) == jobs, "all %d exports ran", len(iv))
	s.check(peak == limit, "at most %d ran at once, and %d did (the limit was used, never exceeded)", limit, peak)
	seen := map[int64]bool{}
	for _, x := range iv {
		seen[x.fence] = true
	}
	s.check(len(seen) == jobs, "every permit had its own fencing token (%d distinct)", len(seen))
	// A release hands its permit to a queued waiter inside Redis and wakes it: every export that
	// had to wait starts right after another one ended, never after the fallback retry (≥ 1 s).
	// (An export that started before any had ended took a free permit, however slow its first
	// round trip was on a loaded machine.)
	firstEnd := iv[0].end
	for _, x := range iv {
		if x.end.Before(firstEnd) {
			firstEnd = x.end
		}
	}
	// The bound is the fallback retry's earliest (backoff/2): a start before it came from a release.
	// The slowest handoff is shown: a few ms here; more on a machine busy with other work.
	waited, handed := 0, 0
	var slowest time.Duration
	for _, x := range iv {
		if x.start.Before(firstEnd) {
			continue // took a free permit at once
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
		"%d/%d waiting exports started after a release, before the fallback retry (%v) could move them (the permit handed on; slowest %v after the release)",
		handed, waited, backoff/2, slowest.Round(100*time.Microsecond))
	return nil
}
