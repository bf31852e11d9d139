package cronlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/cronlock"
	"github.com/robfig/cron/v3"
)

// Leader mode with two replicas: only the leader runs the job, at every firing; the follower
// skips. The leader stops (and resigns): the follower takes over at once, woken by the release.
// Its leadership is then taken away (an operator's force-release): its running job's context is
// cancelled with ErrLost.
func TestWithLeader_twoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	var (
		evs     [2]events
		lockers [2]*cronlock.Locker
		jobs    [2]cron.Job
		runs    [2]atomic.Int32
		block   atomic.Bool // the job waits for its context to end
	)
	var operator *core.Client
	for i := range 2 {
		rdb := srv.Client(t)
		c := locktest.NewClient(t, rdb)
		operator = c
		e, err := election.New(c, rdb, "billing-cron", election.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		lockers[i] = newLocker(t, c, cronlock.WithLeader(e), cronlock.WithClock(fixed(tick)), cronlock.WithHook(evs[i].hook))
		jobs[i] = lockers[i].Wrap("report", mustParse(t, "* * * * * *"))(cronlock.Func(func(ctx context.Context) error {
			runs[i].Add(1)
			if got, ok := cronlock.Tick(ctx); !ok || !got.Equal(tick) {
				return errors.New("no tick in the job's context")
			}
			if l, ok := core.FromContext(ctx); !ok || l.Name() != "@election/billing-cron" {
				return errors.New("the job does not run under the leadership lock")
			}
			if block.Load() {
				<-ctx.Done()
				return context.Cause(ctx)
			}
			return nil
		}))
	}
	fire := func(i int) cronlock.Event { jobs[i].Run(); return evs[i].last(t) }
	leader := -1
	locktest.Eventually(t, 3*time.Second, "a replica leads", func() bool {
		for i := range 2 {
			if fire(i).Outcome == cronlock.OutcomeRan {
				leader = i
				return true
			}
		}
		return false
	})
	follower := 1 - leader
	var fence int64
	for range 5 {
		ev := fire(leader)
		if ev.Outcome != cronlock.OutcomeRan || ev.Err != nil || ev.Fence <= 0 || (fence != 0 && ev.Fence != fence) {
			t.Fatalf("leader: %+v", ev)
		}
		fence = ev.Fence
		if ev := fire(follower); ev.Outcome != cronlock.OutcomeFollower || ev.Fence != 0 {
			t.Fatalf("follower: %+v", ev)
		}
	}
	if runs[follower].Load() != 0 || runs[leader].Load() != 6 {
		t.Fatalf("runs: leader %d, follower %d", runs[leader].Load(), runs[follower].Load())
	}

	// The leader stops: the follower leads within a few round trips, not after the TTL (1s).
	stopped := time.Now()
	lockers[leader].Stop()
	locktest.Eventually(t, 3*time.Second, "the follower took over", func() bool { return fire(follower).Outcome == cronlock.OutcomeRan })
	t.Logf("follower took over %v after the leader stopped", time.Since(stopped))
	if d := time.Since(stopped); d > 500*time.Millisecond {
		t.Fatalf("follower took over %v after the leader stopped, want woken by its resignation", d)
	}
	if ev := evs[follower].last(t); ev.Fence <= fence {
		t.Fatalf("new term's fence %d, want more than %d", ev.Fence, fence)
	}
	if ev := fire(leader); ev.Outcome != cronlock.OutcomeError || !errors.Is(ev.Err, cronlock.ErrStopped) {
		t.Fatalf("stopped replica: %+v", ev)
	}

	// Leadership taken away while the job runs: its context is cancelled with ErrLost.
	block.Store(true)
	done := make(chan cronlock.Event, 1)
	go func() { done <- fire(follower) }()
	locktest.Eventually(t, 2*time.Second, "the job started", func() bool { return runs[follower].Load() == 2 })
	if ok, err := operator.ForceRelease(context.Background(), "@election/billing-cron"); !ok || err != nil {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	select {
	case ev := <-done:
		if ev.Outcome != cronlock.OutcomeLost || !errors.Is(ev.Err, core.ErrLost) {
			t.Fatalf("deposed leader's run: %+v", ev)
		}
	case <-time.After(2 * time.Second): // a renewal interval is a third of the TTL
		t.Fatal("the deposed leader's job was not cancelled")
	}
}

// Leader mode refuses a nil election and RetryOnError (there are no completion markers).
func TestWithLeader_invalid(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	e, err := election.New(c, rdb, "x")
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]cronlock.Option{{cronlock.WithLeader(nil)}, {cronlock.WithLeader(e), cronlock.RetryOnError()}} {
		if _, err := cronlock.New(c, opts...); !errors.Is(err, cronlock.ErrInvalid) {
			t.Errorf("%d options: %v, want ErrInvalid", len(opts), err)
		}
	}
}

// In leader mode WithMaxHold cancels a hung run's context (OutcomeMaxHold) and the replica keeps
// leading; while a run goes on, the job's next firing is skipped as busy.
func TestWithLeader_maxHoldAndBusy(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	e, err := election.New(c, rdb, "solo", election.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var evs events
	l := newLocker(t, c, cronlock.WithLeader(e), cronlock.WithClock(fixed(tick)), cronlock.WithHook(evs.hook),
		cronlock.WithMaxHold(300*time.Millisecond))
	started := make(chan struct{}, 1)
	var cause error
	job := l.Wrap("hung", mustParse(t, "* * * * * *"))(cronlock.Func(func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		cause = context.Cause(ctx)
		return cause
	}))
	locktest.Eventually(t, 3*time.Second, "leading", func() bool {
		ev := cronlock.Event{Outcome: cronlock.OutcomeFollower}
		done := make(chan struct{})
		go func() { job.Run(); close(done) }()
		select {
		case <-started:
			locktest.Eventually(t, time.Second, "busy", func() bool {
				job.Run() // fires again while the run goes on
				return evs.last(t).Outcome == cronlock.OutcomeBusy
			})
			<-done
			ev = evs.last(t)
		case <-done:
		}
		return ev.Outcome != cronlock.OutcomeFollower
	})
	var mh *core.MaxHoldError
	if ev := evs.last(t); ev.Outcome != cronlock.OutcomeMaxHold || !errors.As(cause, &mh) || !errors.Is(ev.Err, core.ErrMaxHold) {
		t.Fatalf("%+v (cause %v), want max_hold", ev, cause)
	}
	if ld, err := e.Leader(context.Background()); err != nil || ld.Fence == 0 {
		t.Fatalf("leader after the max hold: %+v, %v; want still leading", ld, err)
	}
}
