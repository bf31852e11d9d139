package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/gocronlock"
)

// skewed is the real clock of a machine whose clock is off by `by`: it reads `by` ahead (by > 0)
// or behind (by < 0), so a scheduler on it fires each activation `by` early or late in real time.
// Durations and timers are the real ones.
type skewed struct {
	clockwork.Clock
	by time.Duration
}

func (c skewed) Now() time.Time                  { return time.Now().Add(c.by) }
func (c skewed) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewed) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// replicaLog records the runs of every replica and why the others skipped.
type replicaLog struct {
	mu      sync.Mutex
	runs    map[int64][]int // run (Unix ms) -> replicas that ran it
	skips   map[string]int  // "done", "busy" or the error
	perRepl map[int]int     // replica -> runs
	first   time.Time       // the first run
}

func (g *replicaLog) ran(tick time.Time, replica int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runs[tick.UnixMilli()] = append(g.runs[tick.UnixMilli()], replica)
	g.perRepl[replica]++
	if g.first.IsZero() {
		g.first = tick
	}
}

func (g *replicaLog) firstRun() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.first
}

func (g *replicaLog) skipped(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case errors.Is(err, gocronlock.ErrDone):
		g.skips["done"]++
	case errors.Is(err, gocronlock.ErrBusy):
		g.skips["busy"]++
	default:
		g.skips[err.Error()]++
	}
}

func (g *replicaLog) count(replica int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.perRepl[replica]
}

func (g *replicaLog) distinct() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.runs)
}

// verdict is what the runs of a replica check came to.
type verdict struct {
	expected, seen, duplicates, gaps int
	offGrid                          int // runs that are no activation (no multiple of the period)
	skips                            map[string]int
	notes                            []string
}

// check counts, between the first and the last run seen, the runs expected (one per period), the
// runs seen, the runs that ran more than once and the runs that did not run.
func (g *replicaLog) check(period time.Duration) verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	ticks := slices.Sorted(maps.Keys(g.runs))
	v := verdict{seen: len(ticks), skips: maps.Clone(g.skips)}
	if len(ticks) == 0 {
		return v
	}
	p := period.Milliseconds()
	v.expected = int((ticks[len(ticks)-1]-ticks[0])/p) + 1
	for i, tick := range ticks {
		if tick%p != 0 {
			v.offGrid++
		}
		if n := len(g.runs[tick]); n > 1 {
			v.duplicates += n - 1
			v.notes = append(v.notes, fmt.Sprintf("run %d ran %d times, by replicas %v", tick, n, g.runs[tick]))
		}
		if i > 0 && tick-ticks[i-1] != p {
			v.gaps += int((tick-ticks[i-1])/p) - 1
			v.notes = append(v.notes, fmt.Sprintf("runs %d..%d missing", ticks[i-1]+p, tick-p))
		}
	}
	return v
}

const (
	period = 200 * time.Millisecond
	work   = 40 * time.Millisecond
)

// runReplicas runs one scheduler per skew (sorted from the most ahead to the most behind), each
// with its own Redis connection, core.Client and Locker on a clock skewed by that much, all
// scheduling job "sweep" every period; every run works for `work`. Replica 0 starts first; each
// other starts once its clock reads replica 0's first run, so that it fires for no activation
// from before replica 0 started (a lagging replica would run those: nobody else fired for them).
// Once replica 0 has run stopAfter runs, its scheduler is shut down; the others run until `total`
// distinct runs were seen, then shut down too.
func runReplicas(t *testing.T, skews []time.Duration, stopAfter, total int, opts ...gocronlock.Option) *replicaLog {
	t.Helper()
	srv := redistest.Start(t)
	g := &replicaLog{runs: map[int64][]int{}, skips: map[string]int{}, perRepl: map[int]int{}}
	scheds := make([]gocron.Scheduler, len(skews))
	for i, by := range skews {
		clock := skewed{clockwork.NewRealClock(), by}
		scheds[i] = newScheduler(t, gocron.WithClock(clock))
		l := newLocker(t, locktest.NewClient(t, srv.Client(t)), append([]gocronlock.Option{gocronlock.WithClock(clock.Now)}, opts...)...)
		if _, err := l.NewJob(scheds[i], gocron.DurationJob(period), "sweep", func(ctx context.Context) error {
			tick, ok := gocronlock.Tick(ctx)
			if !ok {
				return fmt.Errorf("no run in the job's context")
			}
			g.ran(tick, i)
			select {
			case <-time.After(work):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}, gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) { g.skipped(err) }))); err != nil {
			t.Fatal(err)
		}
	}
	scheds[0].Start()
	locktest.Eventually(t, 10*time.Second, "replica 0's first run", func() bool { return !g.firstRun().IsZero() })
	for i, s := range scheds[1:] {
		by := skews[i+1]
		locktest.Eventually(t, 10*time.Second, "the replica's clock to reach the first run", func() bool {
			return !time.Now().Add(by).Before(g.firstRun())
		})
		s.Start()
	}
	locktest.Eventually(t, time.Duration(stopAfter+10)*period+10*time.Second, "replica 0's runs", func() bool { return g.count(0) >= stopAfter })
	shutdown(t, scheds[0])
	locktest.Eventually(t, time.Duration(total+10)*period+10*time.Second, "all runs", func() bool { return g.distinct() >= total })
	for _, s := range scheds[1:] {
		shutdown(t, s)
	}
	return g
}

// TestReplicas_eachRunOnce is the proof of the Locker: five schedulers whose clocks are 250 ms
// ahead, 230 ms ahead, right, 450 ms behind and 1.5 s behind run a job every 200 ms that works
// for 40 ms. The replicas that lag fire for each run after it finished (by more than the job's
// duration and by more than the period: 450 ms is over two runs later, 1.5 s seven): they find
// the run's completion marker. The 230 ms replica fires while the 250 ms one runs and finds the
// job's lock. The usual winner is shut down after ten runs and the next one takes over. Every run
// between the first and the last ran exactly once, none is missing, and each is an activation (a
// multiple of the period since the epoch).
func TestReplicas_eachRunOnce(t *testing.T) {
	t.Parallel()
	skews := []time.Duration{250 * time.Millisecond, 230 * time.Millisecond, 0, -450 * time.Millisecond, -1500 * time.Millisecond}
	g := runReplicas(t, skews, 10, 30)
	v := g.check(period)
	for _, n := range v.notes {
		t.Log(n)
	}
	t.Logf("runs expected %d, seen %d, duplicates %d, gaps %d; skews %v (spread %v), period %v, job %v; runs per replica %v; skips %v",
		v.expected, v.seen, v.duplicates, v.gaps, skews, skews[0]-skews[len(skews)-1], period, work, g.perRepl, v.skips)
	if v.duplicates != 0 || v.gaps != 0 || v.offGrid != 0 || v.seen != v.expected || v.seen < 30 {
		t.Errorf("runs expected %d, seen %d, duplicates %d, gaps %d; want every run exactly once", v.expected, v.seen, v.duplicates, v.gaps)
	}
	// Both ways of skipping were exercised, and nothing else failed.
	if v.skips["done"] == 0 || v.skips["busy"] == 0 || len(v.skips) != 2 {
		t.Errorf("skips %v: want only done and busy, both", v.skips)
	}
	if g.perRepl[0] < 10 || g.perRepl[1] == 0 {
		t.Errorf("runs per replica %v: want the first to win, then the second to take over", g.perRepl)
	}
}

// TestReplicas_skewBeyondMaxSkewRunsTwice shows the assumption's edge, and that the check above
// catches a duplicate: with WithMaxSkew(0) a marker lives only a second (its floor), so a replica
// 1.45 s behind (1.7 s behind the other) fires after it expired and runs the run again. (The skews
// put the two replicas' firings out of each other's runs, so that neither finds the job's lock
// held by a run of another activation.)
func TestReplicas_skewBeyondMaxSkewRunsTwice(t *testing.T) {
	t.Parallel()
	g := runReplicas(t, []time.Duration{250 * time.Millisecond, -1450 * time.Millisecond}, 12, 14, gocronlock.WithMaxSkew(0))
	v := g.check(period)
	t.Logf("runs expected %d, seen %d, duplicates %d, gaps %d", v.expected, v.seen, v.duplicates, v.gaps)
	if v.duplicates == 0 {
		t.Errorf("no run ran twice although the lagging replica fires after its marker expired")
	}
}
