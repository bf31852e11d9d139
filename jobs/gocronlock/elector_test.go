package gocronlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/gocronlock"
	"github.com/redis/go-redis/v9"
)

// newElector returns an Elector of election "jobs" over rdb (TTL 1s), stopped when the test ends.
func newElector(t *testing.T, rdb redis.UniversalClient, value string) *gocronlock.Elector {
	t.Helper()
	e, err := election.New(locktest.NewClient(t, rdb), rdb, "jobs", election.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	el, err := gocronlock.NewElector(e, gocronlock.WithValue(value))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := el.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return el
}

func leads(el *gocronlock.Elector) bool { return el.IsLeader(context.Background()) == nil }

// Start, Stop and IsLeader: one of two Electors leads; the leader's Stop resigns and the other
// leads at once; Start twice is an error, Stop before Start and Stop twice do nothing, and ending
// Start's context ends the campaign (no goroutine is left: TestMain checks).
func TestElector_lifecycle(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	if _, err := gocronlock.NewElector(nil); !errors.Is(err, gocronlock.ErrInvalid) || !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("NewElector(nil): %v", err)
	}
	rdb := srv.Client(t)
	e, err := election.New(locktest.NewClient(t, rdb), rdb, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gocronlock.NewElector(e, gocronlock.WithTTL(time.Second)); !errors.Is(err, gocronlock.ErrInvalid) {
		t.Fatalf("NewElector with a Locker's option: %v", err)
	}
	a, b := newElector(t, srv.Client(t), "a"), newElector(t, srv.Client(t), "b")
	if err := a.IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) || !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("IsLeader before Start: %v", err)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "a to lead", func() bool { return leads(a) })
	if err := a.Start(ctx); !errors.Is(err, gocronlock.ErrInvalid) {
		t.Fatalf("second Start: %v", err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if leads(b) {
		t.Fatal("two leaders")
	}
	stopped := time.Now()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Fatalf("IsLeader after Stop: %v", err)
	}
	locktest.Eventually(t, 5*time.Second, "b to lead", func() bool { return leads(b) })
	if d := time.Since(stopped); d > 900*time.Millisecond { // well before a's lock could expire
		t.Errorf("b led %v after a stopped: the resignation did not wake it", d)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	c := newElector(t, srv.Client(t), "c")
	if err := c.Start(cctx); err != nil {
		t.Fatal(err)
	}
	cancel() // ends c's campaign; its Stop (at cleanup) returns at once
}

// run is one run of the job on one replica, as the job saw it.
type electedRun struct {
	replica int
	fence   int64
	cause   error // why the job's context ended, nil if the job ended on its own
}

// TestElector_stalledLeaderDeposedAndFenced runs three gocron schedulers, each with its own
// Elector; the job runs every 100 ms. The leader's Redis replies are then held back for 3 s (a
// stalled leader: a network partition, a long pause): its term ends after the election's TTL (1
// s), and from that moment IsLeader fails and its running jobs' contexts are cancelled with a
// cause matching core.ErrLost; another replica leads with a larger fence and runs the job. It is
// fenced: whenever a job of the new leader starts, every job of the old one has its context
// cancelled already, and no job of the old leader starts with a live context after that. When its
// replies flow again, the old leader follows.
func TestElector_stalledLeaderDeposedAndFenced(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	proxy := srv.StartDelayProxy(t, 0)
	rdbA := redis.NewClient(proxy.Options())
	t.Cleanup(func() { _ = rdbA.Close() })
	els := []*gocronlock.Elector{newElector(t, rdbA, "a"), newElector(t, srv.Client(t), "b"), newElector(t, srv.Client(t), "c")}

	var (
		mu         sync.Mutex
		runs       []electedRun
		liveA      = map[*context.Context]context.Context{} // contexts of the stalled leader's jobs running now
		violations []string
		newRan     atomic.Bool // a job of a later term has started
		firstFence atomic.Int64
		hold       atomic.Bool // the old leader's jobs then wait for their context to end
	)
	job := func(replica int) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			l, _ := core.FromContext(ctx)
			fence := l.Fence()
			firstFence.CompareAndSwap(0, fence)
			mu.Lock()
			if fence > firstFence.Load() {
				newRan.Store(true)
				for _, c := range liveA {
					if c.Err() == nil {
						violations = append(violations, "a job of the new leader started while one of the old leader's had a live context")
					}
				}
			} else if newRan.Load() && ctx.Err() == nil {
				violations = append(violations, "a job of the old leader started with a live context after the new leader ran")
			}
			key := &ctx
			if fence == firstFence.Load() {
				liveA[key] = ctx
			}
			mu.Unlock()
			wait := 20 * time.Millisecond
			if fence == firstFence.Load() && hold.Load() {
				wait = 30 * time.Second // until the term ends
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
			mu.Lock()
			delete(liveA, key)
			r := electedRun{replica: replica, fence: fence}
			if ctx.Err() != nil {
				r.cause = context.Cause(ctx)
			}
			runs = append(runs, r)
			mu.Unlock()
			return nil
		}
	}
	count := func(pred func(electedRun) bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range runs {
			if pred(r) {
				n++
			}
		}
		return n
	}
	ctx := context.Background()
	if err := els[0].Start(ctx); err != nil { // a leads first
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "a to lead", func() bool { return leads(els[0]) })
	for i, el := range els {
		s := newScheduler(t, gocron.WithDistributedElector(el))
		if _, err := s.NewJob(gocron.DurationJob(100*time.Millisecond), el.Task(job(i))); err != nil {
			t.Fatal(err)
		}
		s.Start()
		if i > 0 {
			if err := el.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	locktest.Eventually(t, 10*time.Second, "five runs on a", func() bool {
		return count(func(r electedRun) bool { return r.replica == 0 }) >= 5
	})

	hold.Store(true)
	proxy.Set(3*time.Second, 0)
	stalled := time.Now()
	locktest.Eventually(t, 5*time.Second, "a to be deposed", func() bool { return !leads(els[0]) })
	deposed := time.Since(stalled)
	if err := els[0].IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) || !errors.Is(err, core.ErrLost) {
		t.Errorf("the stalled leader's IsLeader: %v, want ErrNotLeader and ErrLost", err)
	}
	locktest.Eventually(t, 10*time.Second, "five runs of a new term", func() bool {
		return count(func(r electedRun) bool { return r.fence > firstFence.Load() }) >= 5
	})
	t.Logf("a deposed %v after its replies stalled; new leader's runs after %v", deposed.Round(time.Millisecond), time.Since(stalled).Round(time.Millisecond))
	proxy.Set(0, 0)
	// Once its replies flow again (after the 3s already held), a follows: five more runs of the
	// new term and none of a's.
	before := count(func(r electedRun) bool { return r.fence > firstFence.Load() })
	locktest.Eventually(t, 15*time.Second, "the stall to pass and five more runs", func() bool {
		return time.Since(stalled) > 3500*time.Millisecond && count(func(r electedRun) bool { return r.fence > firstFence.Load() }) >= before+5
	})
	if leads(els[0]) {
		t.Error("the old leader leads again while the new one lives")
	}

	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	var aRuns, aCancelled, newRuns int
	var newFence int64
	for _, r := range runs {
		switch {
		case r.fence == firstFence.Load():
			aRuns++
			if r.cause != nil {
				aCancelled++
				if !errors.Is(r.cause, core.ErrLost) {
					t.Errorf("the old leader's job ended with %v, want a loss", r.cause)
				}
			}
			if r.replica != 0 {
				t.Errorf("replica %d ran a job of a's term", r.replica)
			}
		default:
			newRuns++
			if r.replica == 0 {
				t.Errorf("a ran a job in a later term: %+v", r)
			}
			if newFence == 0 {
				newFence = r.fence
			}
		}
	}
	t.Logf("old leader: %d runs (%d cancelled by the loss); new leader: %d runs, fence %d > %d", aRuns, aCancelled, newRuns, newFence, firstFence.Load())
	if aCancelled == 0 {
		t.Error("no job of the stalled leader was cancelled by the loss")
	}
}
