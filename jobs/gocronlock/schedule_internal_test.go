package gocronlock

import (
	"context"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
)

// The Locker's activations are gocron's: for every supported kind of job, each of the next runs
// gocron schedules (Job.NextRuns) is matched to itself when it fires on time, late or early by
// up to the window, and a firing half-way between two runs is matched to none.
func TestScheduleOf_matchesGocronRuns(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Kolkata") // +05:30: hours differ from UTC's
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	start := time.Date(2030, 1, 30, 8, 59, 58, 700_000_000, loc)
	fake := clockwork.NewFakeClockAt(start)
	s, err := gocron.NewScheduler(gocron.WithClock(fake), gocron.WithLocation(loc))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Shutdown() }()
	at := gocron.NewAtTimes(gocron.NewAtTime(9, 0, 0), gocron.NewAtTime(17, 30, 15))
	defs := map[string]gocron.JobDefinition{
		"cron":           gocron.CronJob("*/5 * * * *", false),
		"cron-seconds":   gocron.CronJob("*/7 * * * * *", true),
		"cron-tz":        gocron.CronJob("CRON_TZ=America/New_York 30 9 * * 1-5", false),
		"cron-descr":     gocron.CronJob("@hourly", false),
		"daily":          gocron.DailyJob(1, at),
		"weekly":         gocron.WeeklyJob(1, gocron.NewWeekdays(time.Monday, time.Friday), at),
		"monthly":        gocron.MonthlyJob(1, gocron.NewDaysOfTheMonth(1, 15, 31), at),
		"one-time":       gocron.OneTimeJob(gocron.OneTimeJobStartDateTimes(start.Add(time.Hour), start.Add(50*time.Hour))),
		"duration-whole": gocron.DurationJob(2 * time.Second),
	}
	for name, def := range defs {
		j, err := s.NewJob(def, gocron.NewTask(func() {}), gocron.WithName(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sched, err := scheduleOf(j.Schedule(), loc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e, ok := sched.(every); ok { // as NewJob starts it
			if _, err := s.Update(j.ID(), def, gocron.NewTask(func() {}), gocron.WithName(name),
				gocron.WithStartAt(gocron.WithStartDateTimePast(align(start, time.Duration(e))))); err != nil {
				t.Fatal(err)
			}
		}
		defer func(j gocron.Job, sched schedule) {
			checkRuns(t, name, j, sched)
		}(j, sched)
	}
	s.Start()
}

func checkRuns(t *testing.T, name string, j gocron.Job, sched schedule) {
	t.Helper()
	var runs []time.Time
	locktestEventually(t, func() bool {
		runs, _ = j.NextRuns(12)
		return len(runs) > 0
	})
	for i, r := range runs {
		if r.IsZero() { // a OneTimeJob's runs are all listed
			runs = runs[:i]
			break
		}
	}
	w := sched.window()
	for i, run := range runs {
		for _, at := range []time.Time{run, run.Add(w - time.Millisecond), run.Add(-w + time.Millisecond)} {
			if got, ok := sched.nearest(at); !ok || !got.Equal(run) {
				t.Errorf("%s: firing at %v for run %v matched %v %v", name, at, run, got, ok)
			}
		}
		if i > 0 {
			if g := sched.gap(runs[i-1]); g != run.Sub(runs[i-1]) {
				t.Errorf("%s: gap after %v = %v, want %v", name, runs[i-1], g, run.Sub(runs[i-1]))
			}
			if mid := runs[i-1].Add(run.Sub(runs[i-1]) / 2); run.Sub(runs[i-1]) > 2*w {
				if got, ok := sched.nearest(mid); ok {
					t.Errorf("%s: firing at %v, half-way between two runs, matched %v", name, mid, got)
				}
			}
		}
	}
}

// locktestEventually polls cond for up to 5 s (the scheduler arms its jobs asynchronously).
func locktestEventually(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatal("the scheduler did not schedule the job within 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Definitions whose runs replicas cannot agree on are rejected with the reason.
func TestScheduleOf_rejects(t *testing.T) {
	for name, js := range map[string]gocron.JobSchedule{
		"@every":        gocron.CronJobSchedule{Crontab: "@every 10s"},
		"random":        gocron.DurationRandomJobSchedule{Min: time.Second, Max: 2 * time.Second},
		"daily-2":       gocron.DailyJobSchedule{Interval: 2, AtTimes: []time.Time{time.Date(0, 0, 0, 9, 0, 0, 0, time.UTC)}},
		"weekly-3":      gocron.WeeklyJobSchedule{Interval: 3, DaysOfWeek: []time.Weekday{1}, AtTimes: []time.Time{time.Date(0, 0, 0, 9, 0, 0, 0, time.UTC)}},
		"monthly-end":   gocron.MonthlyJobSchedule{Interval: 1, DaysFromEnd: []int{-1}, AtTimes: []time.Time{time.Date(0, 0, 0, 9, 0, 0, 0, time.UTC)}},
		"sub-ms":        gocron.DurationJobSchedule{Duration: time.Microsecond},
		"bad crontab":   gocron.CronJobSchedule{Crontab: "61 * * * *"},
		"unknown (nil)": nil,
	} {
		if s, err := scheduleOf(js, time.UTC); err == nil {
			t.Errorf("%s: accepted as %#v", name, s)
		}
	}
}

// A DurationJob's activations are the multiples of its period since the epoch: a firing is
// matched to the nearest one; beyond half a second from it (a long period), to none.
func TestEvery_nearest(t *testing.T) {
	base := time.Unix(1_900_000_000, 0).UTC() // a multiple of 200ms and of 10s
	for _, tc := range []struct {
		d, off  time.Duration
		want    time.Duration
		matched bool
	}{
		{200 * time.Millisecond, 0, 0, true},
		{200 * time.Millisecond, 99 * time.Millisecond, 0, true},
		{200 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, true},
		{200 * time.Millisecond, -100 * time.Millisecond, 0, true},
		{200 * time.Millisecond, -101 * time.Millisecond, -200 * time.Millisecond, true},
		{10 * time.Second, 499 * time.Millisecond, 0, true},
		{10 * time.Second, -500 * time.Millisecond, 0, true},
		{10 * time.Second, 501 * time.Millisecond, 0, false},
		{10 * time.Second, 5 * time.Second, 0, false},
		{10 * time.Second, 9700 * time.Millisecond, 10 * time.Second, true},
	} {
		got, ok := every(tc.d).nearest(base.Add(tc.off))
		if ok != tc.matched || (ok && !got.Equal(base.Add(tc.want))) {
			t.Errorf("period %v, firing at +%v: %v %v, want +%v %v", tc.d, tc.off, got.Sub(base), ok, tc.want, tc.matched)
		}
	}
	if got := align(time.Unix(-1, 500), time.Second); !got.Equal(time.Unix(-1, 0)) {
		t.Errorf("align before the epoch: %v", got)
	}
}

// Markers live until the skew plus the window after the activation, and a run's default maximum
// hold is the larger of the period and the TTL.
func TestLocker_markerTTLAndMaxHold(t *testing.T) {
	o, err := build([]Option{WithMaxSkew(3 * time.Second)}, "NewLocker", nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &Locker{opt: o}
	tick := time.Unix(1_900_000_000, 0)
	e := every(200 * time.Millisecond)
	if got := l.markerTTL(e, tick, tick.Add(50*time.Millisecond)); got != 3*time.Second+100*time.Millisecond-50*time.Millisecond {
		t.Errorf("marker TTL %v", got)
	}
	if got := l.markerTTL(e, tick, tick.Add(time.Hour)); got != time.Second {
		t.Errorf("marker TTL of a late release %v, want the 1s floor", got)
	}
	if got := l.maxHold(e, tick); got != DefaultTTL {
		t.Errorf("max hold %v, want the TTL", got)
	}
	if got := l.maxHold(every(time.Hour), tick); got != time.Hour {
		t.Errorf("max hold %v, want the period", got)
	}
	WithMaxHold(0)(&l.opt)
	if got := l.maxHold(e, tick); got != 0 {
		t.Errorf("max hold %v, want none", got)
	}
}
