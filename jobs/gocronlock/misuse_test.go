package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/gocronlock"
)

// A *Locker is no gocron.Locker, so gocron.WithDistributedLocker(locker) and
// gocron.WithDistributedJobLocker(locker) do not compile. gocron passes a locker only the job's
// name, from which no replica can tell which run is due; given the Locker, a scheduler's jobs
// added with s.NewJob were refused on every run, reported only to AfterLockError listeners: a
// DurationJob of 500 ms on two such schedulers ran 0 times in 3 s, with nothing logged.
func TestLocker_isNoGocronLocker(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var l any = newLocker(t, locktest.NewClient(t, srv.Client(t)))
	if _, ok := l.(gocron.Locker); ok {
		t.Fatal("*Locker is a gocron.Locker: gocron's own locker options accept it, and its jobs never run")
	}
}

// A job that starts immediately is refused by NewJob: that first run is each replica's own, and
// the job's later runs count from it. Nothing is left on the scheduler, nothing of the job runs,
// and the name stays free. Start options that keep the job on its schedule are accepted.
func TestLocker_NewJob_refusesStartImmediately(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clock := clockwork.NewFakeClockAt(t0.Add(-300 * time.Millisecond))
	s := newScheduler(t, gocron.WithClock(clock), gocron.WithLocation(time.UTC))
	s.Start() // a started scheduler runs an immediate job the moment it is added
	l := newLocker(t, locktest.NewClient(t, srv.Client(t)), gocronlock.WithClock(clock.Now), gocronlock.WithLocation(time.UTC))
	ran := make(chan string, 10)
	job := func(name string) func(context.Context) error {
		return func(context.Context) error { ran <- name; return nil }
	}
	now := gocron.WithStartAt(gocron.WithStartImmediately())
	for name, def := range map[string]gocron.JobDefinition{
		"cron":     gocron.CronJob(perSecond, true),
		"duration": gocron.DurationJob(1500 * time.Millisecond),
		"daily":    gocron.DailyJob(1, gocron.NewAtTimes(gocron.NewAtTime(9, 0, 0))),
	} {
		if _, err := l.NewJob(s, def, name, job(name), now); !errors.Is(err, gocronlock.ErrInvalid) || !errors.Is(err, core.ErrInvalid) ||
			!strings.Contains(err.Error(), "WithStartImmediately") {
			t.Errorf("%s with WithStartImmediately: %v, want an error matching ErrInvalid naming the option", name, err)
		}
	}
	if _, err := l.NewJob(s, gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()), "once", job("once")); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("OneTimeJobStartImmediately: %v, want an error matching ErrInvalid", err)
	}
	if n := len(s.Jobs()); n != 0 {
		t.Fatalf("%d refused jobs left on the scheduler", n)
	}
	for name, opt := range map[string]gocron.JobOption{
		"cron":     gocron.WithStartAt(gocron.WithStartDateTime(t0)),
		"duration": gocron.WithStartAt(gocron.WithStartDateTime(t0.Add(time.Hour))),
		"daily":    gocron.WithSingletonMode(gocron.LimitModeReschedule),
	} {
		def := map[string]gocron.JobDefinition{"cron": gocron.CronJob(perSecond, true),
			"duration": gocron.DurationJob(1500 * time.Millisecond),
			"daily":    gocron.DailyJob(1, gocron.NewAtTimes(gocron.NewAtTime(9, 0, 0)))}[name]
		if _, err := l.NewJob(s, def, name, job(name), opt); err != nil {
			t.Errorf("%s: %v, want the job added", name, err)
		}
	}
	if n := len(s.Jobs()); n != 3 {
		t.Fatalf("%d jobs on the scheduler, want 3", n)
	}
	select {
	case name := <-ran:
		t.Fatalf("job %s ran although the clock stands before its first run", name)
	default:
	}
}

// A run due the moment NewJob adds the job to a started scheduler runs: the Locker knows the job's
// schedule before gocron can fire it (it refused such a run while the job was "still being
// added"). A start at exactly the scheduler's time is no immediate start: here it is an activation.
func TestLocker_NewJob_runDueAtOnceRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clock := clockwork.NewFakeClockAt(t0)
	s := newScheduler(t, gocron.WithClock(clock), gocron.WithLocation(time.UTC))
	s.Start()
	l := newLocker(t, locktest.NewClient(t, srv.Client(t)), gocronlock.WithClock(clock.Now), gocronlock.WithLocation(time.UTC))
	const jobs = 5 // the refusal was a race: several jobs make it show
	ran := make(chan time.Time, jobs)
	for i := range jobs {
		if _, err := l.NewJob(s, gocron.CronJob(perSecond, true), fmt.Sprintf("at-once-%d", i), func(ctx context.Context) error {
			tick, _ := gocronlock.Tick(ctx)
			ran <- tick
			return nil
		}, gocron.WithStartAt(gocron.WithStartDateTime(clock.Now()))); err != nil {
			t.Fatalf("a start at the scheduler's time: %v, want the job added", err)
		}
	}
	for range jobs {
		select {
		case tick := <-ran:
			if !tick.Equal(t0) {
				t.Fatalf("run %v, want %v", tick, t0)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a job due at once did not run")
		}
	}
}

// gocron reports a refused run only to the job's AfterLockError listener, so the Locker logs each
// one, to slog.Default() without WithLogger: a run that is no scheduled run (Job.RunNow) and a job
// run without its lock at Error, a run another replica ran already at Debug (a replica's ordinary
// share, below slog.Default()'s level).
func TestLocker_refusedRunsAreLogged(t *testing.T) { // not parallel: it sets slog.Default()
	srv := redistest.Start(t)
	var logs locktest.SyncBuffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))

	s := newScheduler(t)
	l := newLocker(t, locktest.NewClient(t, srv.Client(t)))
	lockErr := make(chan error, 1)
	j, err := l.NewJob(s, gocron.CronJob("0 0 1 1 *", false), "yearly", func(context.Context) error { return nil },
		gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) { lockErr <- err })))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if err := j.RunNow(); err != nil {
		t.Fatal(err)
	}
	if err := <-lockErr; !errors.Is(err, gocronlock.ErrOffSchedule) {
		t.Fatalf("Lock: %v, want ErrOffSchedule", err)
	}
	if got := logs.String(); !strings.Contains(got, `level=ERROR msg="lockkit: gocronlock: run refused" job=yearly error="lockkit: gocronlock: not a scheduled run`) {
		t.Fatalf("the refused run was not logged to slog.Default() at Error: %q", got)
	}

	// A job run without its lock: the scheduler's elector takes precedence over the job's locker.
	es := newScheduler(t, gocron.WithDistributedElector(leader{}))
	jobErr := make(chan error, 1)
	ej, err := newLocker(t, locktest.NewClient(t, srv.Client(t))).NewJob(es, gocron.CronJob("0 0 1 1 *", false), "elected",
		func(context.Context) error { return nil },
		gocron.WithEventListeners(gocron.AfterJobRunsWithError(func(_ uuid.UUID, _ string, err error) { jobErr <- err })))
	if err != nil {
		t.Fatal(err)
	}
	es.Start()
	if err := ej.RunNow(); err != nil {
		t.Fatal(err)
	}
	if err := <-jobErr; !errors.Is(err, gocronlock.ErrNotLocked) {
		t.Fatalf("job: %v, want ErrNotLocked", err)
	}
	if got := logs.String(); !strings.Contains(got, `level=ERROR msg="lockkit: gocronlock: run refused" job=elected error="lockkit: gocronlock: job ran without its lock`) {
		t.Fatalf("the job run without its lock was not logged at Error: %q", got)
	}

	// Two replicas fire for one run: the second finds it done.
	a := newFakeReplica(t, locktest.NewClient(t, srv.Client(t)), t0.Add(-time.Second/2), gocron.CronJob(perSecond, true), "shared", nil)
	if o := a.fire(t, t0); !o.ran {
		t.Fatalf("first replica: %+v", o)
	}
	// (The job reports its outcome before gocron unlocks the run: wait for the completion marker.)
	rdb := srv.Client(t)
	locktest.Eventually(t, 5*time.Second, "the run's completion marker", func() bool {
		return markerValue(t, rdb, fmt.Sprintf("lockkit:gocron:{@gocron/shared}:%d", t0.UnixMilli())) == "ok"
	})
	b := newFakeReplica(t, locktest.NewClient(t, srv.Client(t)), t0.Add(-time.Second/2), gocron.CronJob(perSecond, true), "shared", nil)
	if o := b.fire(t, t0.Add(10*time.Millisecond)); !errors.Is(o.lockErr, gocronlock.ErrDone) {
		t.Fatalf("second replica: %+v, want ErrDone", o)
	}
	if got := logs.String(); !strings.Contains(got, `level=DEBUG msg="lockkit: gocronlock: run refused" job=shared error="lockkit: gocronlock: run done already`) ||
		strings.Contains(got, `level=ERROR msg="lockkit: gocronlock: run refused" job=shared`) {
		t.Fatalf("a run done by another replica was not logged at Debug only: %q", got)
	}
}
