package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
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

// t0 is a whole second: the activations of a per-second crontab are t0, t0+1s...
var t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

const perSecond = "* * * * * *"

// Three replicas fire for one run: the first runs it under the job's lock (with the run's
// activation and a fence in its context), the second, firing while it runs, gets ErrBusy, and the
// third, whose clock is behind by far more than the run lasted, fires after it finished and gets
// ErrDone: the completion marker, not the lock, keeps the run from running twice.
func TestLocker_eachRunOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	release := make(chan struct{})
	work := func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	start := t0.Add(-300 * time.Millisecond)
	var rs []*fakeReplica
	for range 3 {
		rs = append(rs, newFakeReplica(t, locktest.NewClient(t, srv.Client(t)), start, gocron.CronJob(perSecond, true), "report", work))
	}

	rs[0].advance(t, t0.Add(2*time.Millisecond)) // fires for t0, 2 ms late: still run t0
	locktest.Eventually(t, 5*time.Second, "the first run to hold the job's lock", func() bool {
		return locktest.Held(t, rdb, locktest.Key("@gocron/report"))
	})
	if o := rs[1].fire(t, t0); !errors.Is(o.lockErr, gocronlock.ErrBusy) || !errors.Is(o.lockErr, core.ErrNotAcquired) {
		t.Fatalf("second replica, while the run is going: %+v, want ErrBusy", o)
	}
	close(release)
	o := rs[0].next(t)
	if !o.ran || o.err != nil || !o.tick.Equal(t0) || o.fence == 0 {
		t.Fatalf("first replica: %+v, want run t0 with a fence", o)
	}
	marker := fmt.Sprintf("lockkit:gocron:{@gocron/report}:%d", t0.UnixMilli())
	locktest.Eventually(t, 5*time.Second, "the run's completion marker", func() bool { return markerValue(t, rdb, marker) == "ok" })
	if ttl := rdb.PTTL(context.Background(), marker).Val(); ttl <= 0 || ttl > gocronlock.DefaultMaxSkew+time.Second {
		t.Errorf("marker PTTL %v, want about %v", ttl, gocronlock.DefaultMaxSkew)
	}
	if locktest.Held(t, rdb, locktest.Key("@gocron/report")) {
		t.Error("the job's lock is still held after the run")
	}
	// Its clock reads t0 only now, long after the run: the marker answers.
	if o := rs[2].fire(t, t0.Add(40*time.Millisecond)); !errors.Is(o.lockErr, gocronlock.ErrDone) || !errors.Is(o.lockErr, core.ErrGuarded) {
		t.Fatalf("third replica, after the run: %+v, want ErrDone", o)
	}
	// The next run is a run of its own, and its fence is larger.
	next := rs[2].fire(t, t0.Add(time.Second))
	if !next.ran || !next.tick.Equal(t0.Add(time.Second)) || next.fence <= o.fence {
		t.Fatalf("next run: %+v after fence %d", next, o.fence)
	}
}

// A job that returns an error is marked "failed" and not run again; one that gocron skipped after
// the lock was taken (a BeforeJobRunsSkipIfBeforeFuncErrors listener) leaves no marker and frees
// the lock, so another replica runs it.
func TestLocker_failedAndSkippedRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	boom := errors.New("boom")
	a := newFakeReplica(t, locktest.NewClient(t, rdb), t0.Add(-time.Second/2), gocron.CronJob(perSecond, true), "failing",
		func(context.Context) error { return boom })
	if o := a.fire(t, t0); !o.ran || !errors.Is(o.err, boom) {
		t.Fatalf("run: %+v", o)
	}
	locktest.Eventually(t, 5*time.Second, "the failed run's marker", func() bool {
		return markerValue(t, rdb, fmt.Sprintf("lockkit:gocron:{@gocron/failing}:%d", t0.UnixMilli())) == "failed"
	})
	b := newFakeReplica(t, locktest.NewClient(t, rdb), t0.Add(-time.Second/2), gocron.CronJob(perSecond, true), "failing", nil)
	if o := b.fire(t, t0); !errors.Is(o.lockErr, gocronlock.ErrDone) {
		t.Fatalf("the failed run fired on another replica: %+v, want ErrDone", o)
	}

	// gocron skips the job after Lock: the lock is given back without a marker.
	clock := clockwork.NewFakeClockAt(t0.Add(-time.Second / 2))
	s := newScheduler(t, gocron.WithClock(clock), gocron.WithLocation(time.UTC))
	l := newLocker(t, locktest.NewClient(t, rdb), gocronlock.WithClock(clock.Now), gocronlock.WithLocation(time.UTC))
	skipped := make(chan struct{}, 1)
	if _, err := l.NewJob(s, gocron.CronJob(perSecond, true), "skipped", func(context.Context) error {
		t.Error("a skipped job ran")
		return nil
	}, gocron.WithEventListeners(gocron.BeforeJobRunsSkipIfBeforeFuncErrors(func(uuid.UUID, string) error {
		skipped <- struct{}{}
		return errors.New("not now")
	}))); err != nil {
		t.Fatal(err)
	}
	s.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(t0.Sub(clock.Now()))
	select {
	case <-skipped:
	case <-ctx.Done():
		t.Fatal("gocron did not call the listener")
	}
	locktest.Eventually(t, 5*time.Second, "the skipped run's lock to be freed", func() bool {
		return !locktest.Held(t, rdb, locktest.Key("@gocron/skipped"))
	})
	if v := markerValue(t, rdb, fmt.Sprintf("lockkit:gocron:{@gocron/skipped}:%d", t0.UnixMilli())); v != "" {
		t.Errorf("skipped run has a marker %q", v)
	}
	c := newFakeReplica(t, locktest.NewClient(t, rdb), t0.Add(-time.Second/2), gocron.CronJob(perSecond, true), "skipped", nil)
	if o := c.fire(t, t0.Add(10*time.Millisecond)); !o.ran || !o.tick.Equal(t0) {
		t.Fatalf("another replica after the skip: %+v, want it to run t0", o)
	}
}

// The job runs under the lock's context: when the lock is lost (here its key is deleted behind
// the holder's back), the context is cancelled with a cause matching core.ErrLost and no marker is
// written, so another replica may run the run again.
func TestLocker_lostLockCancelsJob(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	started := make(chan struct{})
	a := newFakeReplica(t, locktest.NewClient(t, rdb), t0.Add(-time.Second/2), gocron.CronJob(perSecond, true), "lost",
		func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return context.Cause(ctx)
		}, gocronlock.WithTTL(300*time.Millisecond))
	a.advance(t, t0)
	<-started
	if err := rdb.Del(context.Background(), locktest.Key("@gocron/lost")).Err(); err != nil {
		t.Fatal(err)
	}
	o := a.next(t)
	if !o.ran || !errors.Is(o.err, core.ErrLost) || !errors.Is(context.Cause(o.ctx), core.ErrLost) {
		t.Fatalf("run: %+v, want its context cancelled with ErrLost", o)
	}
	if v := markerValue(t, rdb, fmt.Sprintf("lockkit:gocron:{@gocron/lost}:%d", t0.UnixMilli())); v != "" {
		t.Fatalf("a run whose lock was lost left marker %q", v)
	}
	b := newFakeReplica(t, locktest.NewClient(t, rdb), t0.Add(-time.Second/2), gocron.CronJob(perSecond, true), "lost", nil)
	if o := b.fire(t, t0.Add(100*time.Millisecond)); !o.ran || !o.tick.Equal(t0) {
		t.Fatalf("another replica after the loss: %+v, want it to run t0", o)
	}
}

// WithMaxHold ends a run that hangs: its context is cancelled with ErrMaxHold, the lock is
// released without a marker, and the next run is not blocked.
func TestLocker_maxHold(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	a := newFakeReplica(t, locktest.NewClient(t, rdb), t0.Add(-time.Second/2), gocron.CronJob(perSecond, true), "hang",
		func(ctx context.Context) error {
			<-ctx.Done()
			return context.Cause(ctx)
		}, gocronlock.WithMaxHold(200*time.Millisecond))
	begin := time.Now()
	o := a.fire(t, t0)
	if !errors.Is(o.err, core.ErrMaxHold) {
		t.Fatalf("run: %+v, want ErrMaxHold", o)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("the run was ended after %v", d)
	}
	if v := markerValue(t, rdb, fmt.Sprintf("lockkit:gocron:{@gocron/hang}:%d", t0.UnixMilli())); v != "" {
		t.Fatalf("a run cut by its maximum hold left marker %q", v)
	}
	locktest.Eventually(t, 5*time.Second, "the lock to be released", func() bool { return !locktest.Held(t, rdb, locktest.Key("@gocron/hang")) })
}

// A run that is no scheduled run (Job.RunNow) is refused with ErrOffSchedule: no replica could
// match it.
func TestLocker_runNowIsOffSchedule(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newScheduler(t)
	l := newLocker(t, locktest.NewClient(t, srv.Client(t)))
	lockErr := make(chan error, 1)
	j, err := l.NewJob(s, gocron.CronJob("0 0 1 1 *", false), "yearly", func(context.Context) error {
		t.Error("the job ran")
		return nil
	}, gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) { lockErr <- err })))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if err := j.RunNow(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lockErr:
		if !errors.Is(err, gocronlock.ErrOffSchedule) || !errors.Is(err, core.ErrInvalid) {
			t.Fatalf("Lock: %v, want ErrOffSchedule", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no lock error")
	}
}

// A job added with NewJob that gocron runs without the Locker (the scheduler has an Elector, which
// gocron prefers) is not run: it fails with ErrNotLocked.
func TestLocker_jobWithoutLockIsNotRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newScheduler(t, gocron.WithDistributedElector(leader{}))
	l := newLocker(t, locktest.NewClient(t, srv.Client(t)))
	jobErr := make(chan error, 1)
	j, err := l.NewJob(s, gocron.CronJob("0 0 1 1 *", false), "unlocked", func(context.Context) error {
		t.Error("the job ran")
		return nil
	}, gocron.WithEventListeners(gocron.AfterJobRunsWithError(func(_ uuid.UUID, _ string, err error) { jobErr <- err })))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if err := j.RunNow(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-jobErr:
		if !errors.Is(err, gocronlock.ErrNotLocked) || !errors.Is(err, core.ErrNotHeld) {
			t.Fatalf("job: %v, want ErrNotLocked", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no job error")
	}
}

// leader is an Elector that always leads.
type leader struct{}

func (leader) IsLeader(context.Context) error { return nil }

// Every key a run leaves expires: the job's free lock (kept by core for its fence) and the run's
// marker; the lock lives in namespace gocron.
func TestLocker_keysExpire(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	a := newFakeReplica(t, locktest.NewClient(t, rdb), t0.Add(-time.Second/2), gocron.CronJob(perSecond, true), "keys", nil,
		gocronlock.WithMaxSkew(10*time.Second))
	if o := a.fire(t, t0); !o.ran {
		t.Fatalf("%+v", o)
	}
	marker := fmt.Sprintf("lockkit:gocron:{@gocron/keys}:%d", t0.UnixMilli())
	locktest.Eventually(t, 5*time.Second, "the marker", func() bool { return markerValue(t, rdb, marker) == "ok" })
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{locktest.Key("@gocron/keys"): true, marker: true}
	for _, k := range keys {
		ttl := rdb.PTTL(context.Background(), k).Val()
		if ttl <= 0 {
			t.Errorf("key %s has no TTL (%v)", k, ttl)
		}
		if k == marker && (ttl > 10*time.Second+time.Second/2 || ttl < 9*time.Second) {
			t.Errorf("marker TTL %v, want WithMaxSkew + 0.5s after the activation", ttl)
		}
		if !want[k] {
			t.Errorf("unexpected key %s", k)
		}
		delete(want, k)
	}
	if len(want) != 0 {
		t.Errorf("keys %v missing among %v", want, keys)
	}
}

// NewLocker and NewJob reject what they cannot serve, and a rejected job is not left on the
// scheduler; a name is free again once its job was removed.
func TestLocker_rejects(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locks := locktest.NewClient(t, srv.Client(t))
	for name, opts := range map[string][]gocronlock.Option{
		"ttl":      {gocronlock.WithTTL(time.Microsecond)},
		"max hold": {gocronlock.WithMaxHold(-2 * time.Second)},
		"max skew": {gocronlock.WithMaxSkew(-time.Second)},
		"clock":    {gocronlock.WithClock(nil)},
		"location": {gocronlock.WithLocation(nil)},
		"elector":  {gocronlock.WithValue("x")},
	} {
		_, err := gocronlock.NewLocker(locks, opts...)
		if !errors.Is(err, gocronlock.ErrInvalid) || !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		} else if msg := err.Error(); !strings.HasPrefix(msg, "lockkit: gocronlock: ") || strings.Count(msg, "lockkit") != 1 ||
			strings.Contains(msg, "invalid argument") {
			t.Errorf("%s: error %q, want the adapters' one shape: lockkit: gocronlock: WHAT", name, msg)
		}
	}
	if _, err := gocronlock.NewLocker(nil); !errors.Is(err, gocronlock.ErrInvalid) {
		t.Errorf("nil client: %v", err)
	}

	s := newScheduler(t)
	l := newLocker(t, locks)
	nop := func(context.Context) error { return nil }
	daily := gocron.CronJob("0 9 * * *", false)
	for name, add := range map[string]func() error{
		"empty name": func() error { _, err := l.NewJob(s, daily, "", nop); return err },
		"brace":      func() error { _, err := l.NewJob(s, daily, "a{b}", nop); return err },
		"long name":  func() error { _, err := l.NewJob(s, daily, string(make([]byte, 1001)), nop); return err },
		"nil job":    func() error { _, err := l.NewJob(s, daily, "x", nil); return err },
		"nil sched":  func() error { _, err := l.NewJob(nil, daily, "x", nop); return err },
		"@every":     func() error { _, err := l.NewJob(s, gocron.CronJob("@every 1s", false), "x", nop); return err },
		"random": func() error {
			_, err := l.NewJob(s, gocron.DurationRandomJob(time.Second, 2*time.Second), "x", nop)
			return err
		},
		"daily 2": func() error {
			_, err := l.NewJob(s, gocron.DailyJob(2, gocron.NewAtTimes(gocron.NewAtTime(9, 0, 0))), "x", nop)
			return err
		},
		"monthly end": func() error {
			_, err := l.NewJob(s, gocron.MonthlyJob(1, gocron.NewDaysOfTheMonth(-1), gocron.NewAtTimes(gocron.NewAtTime(9, 0, 0))), "x", nop)
			return err
		},
	} {
		if err := add(); !errors.Is(err, gocronlock.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if n := len(s.Jobs()); n != 0 {
		t.Fatalf("%d rejected jobs left on the scheduler", n)
	}
	j, err := l.NewJob(s, daily, "daily", nop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.NewJob(s, daily, "daily", nop); !errors.Is(err, gocronlock.ErrInvalid) {
		t.Fatalf("second job of the same name: %v", err)
	}
	if err := s.RemoveJob(j.ID()); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "the name to be free again", func() bool {
		_, err := l.NewJob(s, daily, "daily", nop)
		return err == nil
	})
}

// A DurationJob starts on a multiple of its period since the epoch, whenever its replica starts.
func TestLocker_durationJobAligned(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	start := time.Unix(1_900_000_000, 123_456_789).UTC()
	r := newFakeReplica(t, locktest.NewClient(t, srv.Client(t)), start, gocron.DurationJob(150*time.Millisecond), "aligned", nil)
	var runs []time.Time
	locktest.Eventually(t, 5*time.Second, "the job's next runs", func() bool {
		j := r.s.Jobs()
		if len(j) == 1 {
			runs, _ = j[0].NextRuns(3)
		}
		return len(runs) == 3
	})
	for _, run := range runs {
		if run.UnixNano()%int64(150*time.Millisecond) != 0 || run.Before(start) {
			t.Errorf("run at %v: not a multiple of the period after the start", run)
		}
	}
	if o := r.fire(t, runs[0]); !o.ran || !o.tick.Equal(runs[0]) {
		t.Fatalf("%+v, want run %v", o, runs[0])
	}
}

// The keys a Locker writes are the rows docs/keys.md gives them (docs/keys_test.go, in the root
// module, cannot import this one): the run's marker under lockkit:gocron:{@gocron/JOB}:MS, a string.
func TestLocker_keysMatchDocs(t *testing.T) {
	rows := map[string]string{} // key column -> type column
	for _, tab := range locktest.Tables(locktest.Doc(t, "docs/keys.md")) {
		if len(tab.Header) >= 2 && tab.Header[0] == "key" && tab.Header[1] == "type" {
			for _, r := range tab.Rows {
				if spans := locktest.CodeSpans(r[0]); len(spans) == 1 {
					rows[spans[0]] = r[1]
				}
			}
		}
	}
	for key, pattern := range map[string]*regexp.Regexp{
		"lockkit:gocron:{@gocron/JOB}:MS": regexp.MustCompile(`^lockkit:gocron:\{@gocron/keys\}:[0-9]+$`),
		locktest.Key("NAME"):              regexp.MustCompile(`^lockkit:\{@gocron/keys\}$`),
	} {
		typ, ok := rows[key]
		if !ok || !strings.HasPrefix(typ, "string") {
			t.Fatalf("docs/keys.md has no string row %s (type %q)", key, typ)
		}
		srv := redistest.Start(t)
		rdb := srv.Client(t)
		a := newFakeReplica(t, locktest.NewClient(t, rdb), t0.Add(-time.Second/2), gocron.CronJob(perSecond, true), "keys", nil)
		if o := a.fire(t, t0); !o.ran {
			t.Fatalf("%+v", o)
		}
		marker := fmt.Sprintf("lockkit:gocron:{@gocron/keys}:%d", t0.UnixMilli())
		locktest.Eventually(t, 5*time.Second, "the marker", func() bool { return markerValue(t, rdb, marker) == "ok" })
		found := false
		for _, k := range rdb.Keys(context.Background(), "*").Val() {
			if pattern.MatchString(k) {
				found = rdb.Type(context.Background(), k).Val() == "string"
			}
		}
		if !found {
			t.Errorf("no string key of the row %s was written", key)
		}
	}
}
