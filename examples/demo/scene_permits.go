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
		backoff = 2 * time.Second // fallback retry ≥ backoff/2: a quick wake can only come from a release
	)
	var (
		mu            sync.Mutex
		inside, peak  int
		iv            []interval
		waited, woken int
		subscribing   int
	)
	var clients []*core.Client
	for range 2 {
		hook := core.Hook{Attempt: func(_ context.Context, info core.WaitInfo) {
			if info.Acquired && (info.Woken || info.Attempts > 1) {
				mu.Lock()
				waited++
				if info.Woken {
					woken++
				} else if info.Attempts == 2 {
					subscribing++ // the retry right after subscribing found a permit freed meanwhile
				}
				mu.Unlock()
			}
		}}
		c, _, err := s.newLocks(core.WithRetryBackoff(backoff, 2*backoff), core.WithHook(hook))
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
	also := ""
	if subscribing > 0 {
		also = fmt.Sprintf(", %d on the retry after subscribing", subscribing)
	}
	s.check(woken > 0 && woken+subscribing == waited,
		"%d/%d waiting exports got a permit on an attempt woken by a release%s; none by the fallback retry", woken, waited, also)
	return nil
}
