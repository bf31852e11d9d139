package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/jobs/gocronlock"
)

// skewedClock is the clock of a machine whose clock is off by `by`; durations and timers are real.
type skewedClock struct {
	clockwork.Clock
	by time.Duration
}

func (c skewedClock) Now() time.Time                  { return time.Now().Add(c.by) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// sceneGocron: two gocron schedulers, one clock 150 ms ahead and one 400 ms behind, run the same
// job every 300 ms through gocronlock.Locker: each run runs once. The lagging replica fires for
// every run after it finished, and finds its completion marker.
func sceneGocron(ctx context.Context, s *scene) error {
	const (
		job      = "demo-sweep"
		period   = 300 * time.Millisecond
		work     = 100 * time.Millisecond
		wantRuns = 5
	)
	skews := []time.Duration{150 * time.Millisecond, -400 * time.Millisecond}
	type firing struct {
		replica int
		outcome string // "ran", "done", "busy" or an error
		fence   int64
	}
	var (
		mu     sync.Mutex
		runs   = map[int64][]firing{} // by activation, Unix ms
		fired  = make(chan struct{}, 1)
		scheds []gocron.Scheduler
	)
	record := func(run time.Time, f firing) {
		mu.Lock()
		runs[run.UnixMilli()] = append(runs[run.UnixMilli()], f)
		mu.Unlock()
		select {
		case fired <- struct{}{}:
		default:
		}
	}
	for i, by := range skews {
		clock := skewedClock{clockwork.NewRealClock(), by}
		locks, _, err := s.newLocks()
		if err != nil {
			return err
		}
		locker, err := gocronlock.NewLocker(locks, gocronlock.WithClock(clock.Now), gocronlock.WithTTL(5*time.Second))
		if err != nil {
			return err
		}
		sched, err := gocron.NewScheduler(gocron.WithClock(clock))
		if err != nil {
			return err
		}
		scheds = append(scheds, sched)
		skipped := gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
			// Lock matched the firing to the activation nearest to this replica's clock; so do we.
			run := time.UnixMilli(clock.Now().Add(period/2).UnixMilli() / period.Milliseconds() * period.Milliseconds())
			outcome := err.Error()
			switch {
			case errors.Is(err, gocronlock.ErrDone):
				outcome = "done"
			case errors.Is(err, gocronlock.ErrBusy):
				outcome = "busy"
			}
			record(run, firing{replica: i + 1, outcome: outcome})
		})
		if _, err := locker.NewJob(sched, gocron.DurationJob(period), job, func(ctx context.Context) error {
			run, _ := gocronlock.Tick(ctx)
			lock, _ := core.FromContext(ctx)
			record(run, firing{replica: i + 1, outcome: "ran", fence: lock.Fence()})
			sleep(ctx, work) // the job; ctx is the lock's context
			return nil
		}, gocron.WithEventListeners(skipped)); err != nil {
			return err
		}
	}
	stop := sync.OnceFunc(func() {
		for _, sc := range scheds { // waits for running jobs
			_ = sc.Shutdown()
		}
	})
	s.onClose(stop)
	s.logf("2 gocron schedulers run job %q every %v (work %v); replica 1's clock is %v ahead, replica 2's %v behind",
		job, period, work, skews[0], -skews[1])
	// Replica 1 starts first; replica 2 once its clock is half a period before replica 1's first
	// run, so that its first run is that one: it does not run the activations its clock is still
	// at, which fell before replica 1 started.
	scheds[0].Start()
	first := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if len(runs) == 0 {
			return time.Time{}
		}
		return time.UnixMilli(slices.Min(slices.Collect(maps.Keys(runs))))
	}
	for first().IsZero() || time.Now().Add(skews[1]).Before(first().Add(-period/2)) {
		if !sleep(ctx, 5*time.Millisecond) {
			stop()
			return ctx.Err()
		}
	}
	scheds[1].Start()

	complete := func() int { // runs that both replicas fired for
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, f := range runs {
			if len(f) == len(skews) {
				n++
			}
		}
		return n
	}
	for complete() < wantRuns {
		select {
		case <-fired:
		case <-ctx.Done():
			stop()
			return fmt.Errorf("%d of %d runs completed: %w", complete(), wantRuns, ctx.Err())
		}
	}
	stop()

	mu.Lock()
	defer mu.Unlock()
	keys := slices.Sorted(maps.Keys(runs))
	for len(keys) > 0 && len(runs[keys[len(keys)-1]]) < len(skews) {
		keys = keys[:len(keys)-1] // replica 2 was stopped before its clock reached these
	}
	var (
		once, gaps, bad, done int
		fences                []int64
	)
	for i, k := range keys {
		var ran, others []string
		fs := runs[k]
		slices.SortFunc(fs, func(a, b firing) int { return a.replica - b.replica })
		for _, f := range fs {
			switch f.outcome {
			case "ran":
				ran = append(ran, fmt.Sprintf("replica %d ran it (fence %d)", f.replica, f.fence))
				fences = append(fences, f.fence)
			case "done", "busy":
				others = append(others, fmt.Sprintf("%d %s", f.replica, f.outcome))
				if f.outcome == "done" && f.replica == 2 {
					done++
				}
			default:
				bad++
				others = append(others, fmt.Sprintf("%d: %s", f.replica, f.outcome))
			}
		}
		if len(ran) == 1 {
			once++
		}
		if i > 0 && k-keys[i-1] != period.Milliseconds() {
			gaps++
		}
		if len(ran) == 0 {
			ran = []string{"nobody ran it"}
		}
		s.logf("run %s   %-40s others: %s", time.UnixMilli(k).Format("15:04:05.000"), strings.Join(ran, "; "), strings.Join(others, ", "))
	}
	s.check(len(keys) >= wantRuns && once == len(keys), "%d runs, each run exactly once, both replicas firing for it", len(keys))
	s.check(done > 0 && bad == 0, "the replica %v behind fired after each run it did not run had finished and found its completion marker (done), no errors", -skews[1])
	s.check(gaps == 0, "no run missed between the first and the last")
	increasing := len(fences) > 0
	for i := 1; i < len(fences); i++ {
		increasing = increasing && fences[i] > fences[i-1]
	}
	s.check(increasing, "the job lock's fencing token increases run by run")
	return nil
}
