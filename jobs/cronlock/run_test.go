package cronlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/cronlock"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

// tick is a whole second used as the activation in the tests that fire jobs by hand.
var tick = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fire runs name's job once, as a replica whose clock reads now, and returns what it reported.
func fire(t *testing.T, c *core.Client, now time.Time, name string, job cronlock.Func, opts ...cronlock.Option) cronlock.Event {
	t.Helper()
	var evs events
	l := newLocker(t, c, append([]cronlock.Option{cronlock.WithClock(fixed(now)), cronlock.WithHook(evs.hook)}, opts...)...)
	l.Wrap(name, mustParse(t, "* * * * * *"))(job).Run()
	return evs.last(t)
}

func TestWrap_runsOnceThenMarks(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	var runs atomic.Int32
	job := func(ctx context.Context) error {
		n := runs.Add(1)
		got, ok := cronlock.Tick(ctx)
		l, held := core.FromContext(ctx)
		if want := tick.Add(time.Duration(n-1) * time.Second); !ok || !got.Equal(want) || !held || l.Name() != "@cron/report" {
			return fmt.Errorf("run %d: tick %v %v, lock %v", n, got, ok, held)
		}
		return nil
	}
	// A replica 300 ms ahead runs the tick...
	ev := fire(t, c, tick.Add(300*time.Millisecond), "report", job)
	if ev.Outcome != cronlock.OutcomeRan || !ev.Tick.Equal(tick) || ev.Fence <= 0 || ev.Err != nil || ev.Job != "report" {
		t.Fatalf("first replica: %+v", ev)
	}
	firstFence := ev.Fence
	marker := fmt.Sprintf("lockkit:cron:{@cron/report}:%d", tick.Unix())
	if v := markerValue(t, rdb, marker); v != "ok" {
		t.Fatalf("marker %s = %q, want ok", marker, v)
	}
	// ...kept until one period after the next tick, counted from the clock at release.
	if ttl := rdb.PTTL(ctx, marker).Val(); ttl <= time.Second || ttl > 1700*time.Millisecond {
		t.Fatalf("marker TTL %v, want about 1.7s", ttl)
	}
	if locktest.Held(t, rdb, locktest.Key("@cron/report")) {
		t.Fatal("lock not released")
	}
	// ...and a replica 300 ms behind finds it done, in one round trip.
	srv.ResetStats(t)
	ev = fire(t, locktest.NewClient(t, srv.Client(t)), tick.Add(-300*time.Millisecond), "report", job)
	if ev.Outcome != cronlock.OutcomeDone || !ev.Tick.Equal(tick) || ev.Fence != 0 || ev.Err != nil {
		t.Fatalf("late replica: %+v", ev)
	}
	if st := srv.CommandStats(t); st["evalsha"]+st["eval"] != 1 {
		t.Fatalf("late replica sent %v, want one script call", st)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("job ran %d times", n)
	}
	// The next tick runs again, with a higher fence.
	if ev = fire(t, c, tick.Add(time.Second), "report", job); ev.Outcome != cronlock.OutcomeRan || ev.Fence <= firstFence {
		t.Fatalf("next tick: %+v", ev)
	}
}

func TestWrap_busyWhileAnotherReplicaRuns(t *testing.T) {
	srv := redistest.Start(t)
	c1, c2 := locktest.NewClient(t, srv.Client(t)), locktest.NewClient(t, srv.Client(t))
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan cronlock.Event)
	go func() {
		done <- fire(t, c1, tick, "long", func(ctx context.Context) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	ev := fire(t, c2, tick.Add(200*time.Millisecond), "long", func(context.Context) error {
		t.Error("ran while another replica held the lock")
		return nil
	})
	close(release)
	if ev.Outcome != cronlock.OutcomeBusy || ev.Err != nil {
		t.Fatalf("second replica: %+v, want busy", ev)
	}
	if ev := <-done; ev.Outcome != cronlock.OutcomeRan {
		t.Fatalf("first replica: %+v", ev)
	}
}

func TestWrap_failedJobKeepsItsTick(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	boom := errors.New("boom")
	ev := fire(t, c, tick, "fails", func(context.Context) error { return boom })
	if ev.Outcome != cronlock.OutcomeFailed || !errors.Is(ev.Err, boom) {
		t.Fatalf("%+v, want failed with boom", ev)
	}
	if v := markerValue(t, rdb, fmt.Sprintf("lockkit:cron:{@cron/fails}:%d", tick.Unix())); v != "failed" {
		t.Fatalf("marker = %q, want failed", v)
	}
	if ev := fire(t, c, tick, "fails", func(context.Context) error { return nil }); ev.Outcome != cronlock.OutcomeDone {
		t.Fatalf("after a failure: %+v, want done", ev)
	}
}

func TestRetryOnError_leavesTheTickOpen(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ev := fire(t, c, tick, "flaky", func(context.Context) error { return errors.New("boom") }, cronlock.RetryOnError())
	if ev.Outcome != cronlock.OutcomeFailed {
		t.Fatalf("%+v, want failed", ev)
	}
	if n := rdb.Exists(context.Background(), fmt.Sprintf("lockkit:cron:{@cron/flaky}:%d", tick.Unix())).Val(); n != 0 {
		t.Fatal("marker written despite RetryOnError")
	}
	if ev := fire(t, c, tick.Add(100*time.Millisecond), "flaky", func(context.Context) error { return nil }, cronlock.RetryOnError()); ev.Outcome != cronlock.OutcomeRan {
		t.Fatalf("retry by a late replica: %+v, want ran", ev)
	}
}

func TestWrap_panicIsRecoveredAndReported(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv.Client(t))
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	ev := fire(t, c, tick, "panics", func(context.Context) error { panic("kaboom") }, cronlock.WithLogger(logger))
	var pe *cronlock.PanicError
	if ev.Outcome != cronlock.OutcomeFailed || !errors.As(ev.Err, &pe) || pe.Value != "kaboom" || !bytes.Contains(pe.Stack, []byte("run_test.go")) {
		t.Fatalf("%+v, want failed with a *PanicError", ev)
	}
	if out := buf.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "job=panics") || !strings.Contains(out, "kaboom") {
		t.Fatalf("log: %s", out)
	}
	// A plain cron.Job panicking inside a real scheduler does not take the process down either.
	l := newLocker(t, c)
	ran := make(chan struct{}, 10)
	cr := cron.New(cron.WithSeconds())
	cr.Schedule(cronlock.Every(time.Second), l.Wrap("plain", cronlock.Every(time.Second))(cron.FuncJob(func() {
		ran <- struct{}{}
		panic("plain kaboom")
	})))
	cr.Start()
	select {
	case <-ran:
	case <-time.After(3 * time.Second):
		t.Fatal("job did not run")
	}
	stopCron(t, cr, l)
}

func TestWrap_lostLockCancelsTheJob(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	ev := fire(t, c, tick, "stolen", func(jctx context.Context) error {
		if err := rdb.Del(ctx, locktest.Key("@cron/stolen")).Err(); err != nil { // the lock vanishes
			return err
		}
		select {
		case <-jctx.Done():
			return jctx.Err()
		case <-time.After(5 * time.Second):
			return errors.New("job context not cancelled after the lock was lost")
		}
	}, cronlock.WithTTL(300*time.Millisecond))
	var lost *core.LostError
	if ev.Outcome != cronlock.OutcomeLost || !errors.Is(ev.Err, core.ErrLost) || !errors.As(ev.Err, &lost) {
		t.Fatalf("%+v, want lost", ev)
	}
	if n := rdb.Exists(ctx, fmt.Sprintf("lockkit:cron:{@cron/stolen}:%d", tick.Unix())).Val(); n != 0 {
		t.Fatal("marker written by a replica that lost the lock")
	}
}

func TestStop_cancelsRunningJobs(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	var evs events
	l := newLocker(t, c, cronlock.WithClock(fixed(tick)), cronlock.WithHook(evs.hook))
	started := make(chan struct{})
	var cause error
	job := l.Wrap("stoppable", mustParse(t, "* * * * * *"))(cronlock.Func(func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return cause
	}))
	done := make(chan struct{})
	go func() { job.Run(); close(done) }()
	<-started
	l.Stop()
	<-done
	if !errors.Is(cause, cronlock.ErrStopped) {
		t.Fatalf("job context cause %v, want ErrStopped", cause)
	}
	// Stopped mid-run, the tick still counts as run: the marker is written.
	if ev := evs.last(t); ev.Outcome != cronlock.OutcomeFailed || !errors.Is(ev.Err, cronlock.ErrStopped) {
		t.Fatalf("%+v", ev)
	}
	if v := markerValue(t, rdb, fmt.Sprintf("lockkit:cron:{@cron/stoppable}:%d", tick.Unix())); v != "failed" {
		t.Fatalf("marker = %q", v)
	}
	// Firings after Stop do nothing.
	job.Run()
	if ev := evs.last(t); ev.Outcome != cronlock.OutcomeError || !errors.Is(ev.Err, cronlock.ErrStopped) {
		t.Fatalf("after Stop: %+v", ev)
	}
}

func TestWithRedisTime_ignoresTheLocalClock(t *testing.T) {
	srv := redistest.Start(t)
	opt := srv.Options()
	opt.MaxRetries = -1 // fail fast once the server is stopped
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	c := locktest.NewClient(t, rdb)
	srv.ResetStats(t)
	before := time.Now()
	ev := fire(t, c, before.Add(time.Hour), "servertime", func(context.Context) error { return nil }, cronlock.WithRedisTime(rdb))
	if ev.Outcome != cronlock.OutcomeRan {
		t.Fatalf("%+v", ev)
	}
	if d := ev.Tick.Sub(before).Abs(); d > 2*time.Second {
		t.Fatalf("tick %v is %v from now: derived from the skewed local clock", ev.Tick, d)
	}
	// One TIME from WithRedisTime, one inside core's acquire script (the fence's clock floor).
	if st := srv.CommandStats(t); st["time"] != 2 {
		t.Fatalf("TIME called %d times, want 2", st["time"])
	}
	// Redis unreachable: not run, reported.
	srv.Stop(t)
	ev = fire(t, c, time.Now(), "servertime", func(context.Context) error { return nil }, cronlock.WithRedisTime(rdb))
	if ev.Outcome != cronlock.OutcomeError || !errors.Is(ev.Err, core.ErrUnavailable) {
		t.Fatalf("%+v, want error matching ErrUnavailable", ev)
	}
}

func TestAdd_alignsEveryAndUsesTheCronLocation(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv.Client(t))
	loc := time.FixedZone("UTC+5", 5*3600)
	nineAM := time.Date(2030, 1, 2, 9, 0, 0, 0, loc)
	var evs events
	l := newLocker(t, c, cronlock.WithHook(evs.hook), cronlock.WithClock(fixed(nineAM.Add(250*time.Millisecond).UTC())))
	cr := cron.New(cron.WithLocation(loc))
	id, err := l.Add(cr, "0 9 * * *", "nine", func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	cr.Entry(id).WrappedJob.Run()
	if ev := evs.last(t); ev.Outcome != cronlock.OutcomeRan || !ev.Tick.Equal(nineAM) {
		t.Fatalf("%+v, want a run for 09:00 UTC+5", ev)
	}
	id, err = l.Add(cr, "@every 10s", "ten", func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range []int64{1_900_000_001, 1_900_000_007} {
		if next := cr.Entry(id).Schedule.Next(time.Unix(start, 0)); next.Unix() != 1_900_000_010 {
			t.Fatalf("@every 10s from %d: next %d, want the epoch-aligned 1900000010", start, next.Unix())
		}
	}
}

func TestInvalidArguments(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv.Client(t))
	for _, opts := range [][]cronlock.Option{{cronlock.WithTTL(time.Millisecond)}, {cronlock.WithTTL(25 * time.Hour)}, {cronlock.WithClock(nil)}} {
		if _, err := cronlock.New(c, opts...); !errors.Is(err, cronlock.ErrInvalid) {
			t.Errorf("New: %v, want ErrInvalid", err)
		}
	}
	if _, err := cronlock.New(nil); !errors.Is(err, cronlock.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
	l := newLocker(t, c)
	cr := cron.New()
	noop := func(context.Context) error { return nil }
	for _, tc := range []struct{ spec, name string }{
		{"* * * * *", ""}, {"* * * * *", "a{b"}, {"* * * * *", "b}"}, {"* * * * *", strings.Repeat("x", 1001)},
		{"", "x"}, {"TZ=UTC", "x"}, {"* * *", "x"}, {"@every", "x"},
	} {
		if _, err := l.Add(cr, tc.spec, tc.name, noop); !errors.Is(err, cronlock.ErrInvalid) {
			t.Errorf("Add(%q, %q): %v, want ErrInvalid", tc.spec, tc.name, err)
		}
	}
	if _, err := l.Add(nil, "* * * * *", "x", noop); !errors.Is(err, cronlock.ErrInvalid) {
		t.Errorf("Add(nil cron): %v", err)
	}
	if _, err := l.Add(cr, "* * * * *", "x", nil); !errors.Is(err, cronlock.ErrInvalid) {
		t.Errorf("Add(nil job): %v", err)
	}
	if len(cr.Entries()) != 0 {
		t.Errorf("invalid Adds registered %d entries", len(cr.Entries()))
	}
	for _, tc := range []struct {
		name string
		s    cron.Schedule
	}{{"", cronlock.Every(time.Second)}, {"ok", nil}} {
		func() {
			defer func() {
				if err, _ := recover().(error); !errors.Is(err, cronlock.ErrInvalid) {
					t.Errorf("Wrap(%q, %v) panicked with %v, want ErrInvalid", tc.name, tc.s, err)
				}
			}()
			l.Wrap(tc.name, tc.s)
		}()
	}
	// A schedule that never fires is reported at each firing.
	var evs events
	l = newLocker(t, c, cronlock.WithHook(evs.hook))
	never, err := cron.ParseStandard("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	l.Wrap("never", never)(cronlock.Func(noop)).Run()
	if ev := evs.last(t); ev.Outcome != cronlock.OutcomeError || !errors.Is(ev.Err, cronlock.ErrInvalid) {
		t.Errorf("never: %+v", ev)
	}
}
