package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockkit/lockkit/jobs/cronlock"
	"github.com/robfig/cron/v3"
)

// sceneCron: three replicas, each with its own cron.Cron and lock client, schedule the same job
// every second; cronlock lets one of them run each tick and the others skip it.
func sceneCron(ctx context.Context, s *scene) error {
	const (
		job       = "demo-report"
		replicas  = 3
		wantTicks = 4
		work      = 150 * time.Millisecond
	)
	type firing struct {
		replica int
		ev      cronlock.Event
	}
	var (
		mu     sync.Mutex
		ticks  = map[int64][]firing{} // by tick, in Unix seconds
		fired  = make(chan struct{}, 1)
		crons  []*cron.Cron
		lockrs []*cronlock.Locker
	)
	for i := range replicas {
		locks, _, err := s.newLocks()
		if err != nil {
			return err
		}
		l, err := cronlock.New(locks, cronlock.WithTTL(5*time.Second), cronlock.WithHook(func(ev cronlock.Event) {
			mu.Lock()
			ticks[ev.Tick.Unix()] = append(ticks[ev.Tick.Unix()], firing{i + 1, ev})
			mu.Unlock()
			select {
			case fired <- struct{}{}:
			default:
			}
		}))
		if err != nil {
			return err
		}
		c := cron.New(cron.WithSeconds())
		if _, err := l.Add(c, "@every 1s", job, func(ctx context.Context) error {
			sleep(ctx, work) // the job; ctx is the lock's context and carries the tick
			return nil
		}); err != nil {
			return err
		}
		crons, lockrs = append(crons, c), append(lockrs, l)
	}
	stop := sync.OnceFunc(func() {
		for i, c := range crons { // stop the timers, stop the lockers, wait for running jobs
			done := c.Stop()
			lockrs[i].Stop()
			<-done.Done()
		}
	})
	s.onClose(stop)
	s.logf("%d replicas schedule job %q @every 1s (work %v); waiting for %d ticks that all replicas fired",
		replicas, job, work, wantTicks)
	for _, c := range crons {
		c.Start()
	}

	complete := func() int { // ticks that every replica fired for
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, f := range ticks {
			if len(f) == replicas {
				n++
			}
		}
		return n
	}
	for complete() < wantTicks {
		select {
		case <-fired:
		case <-ctx.Done():
			stop()
			return fmt.Errorf("%d of %d ticks completed: %w", complete(), wantTicks, ctx.Err())
		}
	}
	stop()

	mu.Lock()
	defer mu.Unlock()
	keys := slices.Sorted(maps.Keys(ticks))
	var (
		once, gaps, bad int
		fences          []int64
	)
	for i, k := range keys {
		runs := 0
		var ran string
		var others []string
		fs := ticks[k]
		slices.SortFunc(fs, func(a, b firing) int { return a.replica - b.replica })
		for _, f := range fs {
			switch f.ev.Outcome {
			case cronlock.OutcomeRan:
				runs++
				ran = fmt.Sprintf("replica %d ran it (fence %d)", f.replica, f.ev.Fence)
				fences = append(fences, f.ev.Fence)
			case cronlock.OutcomeBusy, cronlock.OutcomeDone:
				others = append(others, fmt.Sprintf("%d %s", f.replica, f.ev.Outcome))
			default:
				bad++
				others = append(others, fmt.Sprintf("%d %s (%v)", f.replica, f.ev.Outcome, f.ev.Err))
			}
		}
		if runs == 1 {
			once++
		}
		if i > 0 && k != keys[i-1]+1 {
			gaps++
		}
		if ran == "" {
			ran = "nobody ran it"
		}
		s.logf("tick %s   %-40s others: %s", time.Unix(k, 0).Format("15:04:05"), ran, strings.Join(others, ", "))
	}
	s.check(len(keys) >= wantTicks && once == len(keys), "%d ticks, each run exactly once (%d replicas fired each)", len(keys), replicas)
	s.check(bad == 0, "the other replicas skipped (busy: still running; done: marker found), no errors")
	s.check(gaps == 0, "no tick missed between the first and the last")
	increasing := len(fences) > 0
	for i := 1; i < len(fences); i++ {
		increasing = increasing && fences[i] > fences[i-1]
	}
	s.check(increasing, "the job lock's fencing token increases tick by tick")
	return nil
}
