package gocronlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
)

// tolerance is how far from an activation, on its replica's clock, a run may reach the Locker and
// still be matched to it (at most half the period of a shorter DurationJob). gocron fires a run
// when the clock it was given reads the activation and calls Lock right away, so the distance is
// the scheduler's dispatch delay, whatever the skew between replicas.
const tolerance = 500 * time.Millisecond

// schedule is a job's activations as the Locker sees them: enough to name the run a firing is for.
// Every replica derives the same activations from the same job definition.
type schedule interface {
	// nearest returns the activation within window() of now, or false if there is none.
	nearest(now time.Time) (time.Time, bool)
	// window is how far from an activation a firing may be: tolerance or less.
	window() time.Duration
	// gap returns the time from the activation tick to the next one, 0 if tick is the last.
	gap(tick time.Time) time.Duration
}

// scheduleOf derives the schedule of a gocron job from its definition (gocron.Job.Schedule), or
// explains why runs of that kind of job cannot be told apart across replicas. Crontabs without a
// time zone are read in loc, as the scheduler reads them.
func scheduleOf(js gocron.JobSchedule, loc *time.Location) (schedule, error) {
	switch s := js.(type) {
	case gocron.CronJobSchedule:
		if strings.Contains(s.Crontab, "@every") {
			return nil, fmt.Errorf("crontab %q: @every counts from each replica's start; use gocron.DurationJob, which NewJob aligns to the epoch", s.Crontab)
		}
		return parseCrontabs(loc, s.Crontab)
	case gocron.DurationJobSchedule:
		if s.Duration < time.Millisecond {
			return nil, fmt.Errorf("DurationJob(%v): runs are named by the millisecond; the period must be at least 1ms", s.Duration)
		}
		return every(s.Duration), nil
	case gocron.DailyJobSchedule:
		return calendar(s.Interval, s.AtTimes, "*", "*")
	case gocron.WeeklyJobSchedule:
		days := make([]string, len(s.DaysOfWeek))
		for i, d := range s.DaysOfWeek {
			days[i] = strconv.Itoa(int(d))
		}
		return calendar(s.Interval, s.AtTimes, "*", strings.Join(days, ","))
	case gocron.MonthlyJobSchedule:
		if len(s.DaysFromEnd) > 0 {
			return nil, fmt.Errorf("MonthlyJob with days counted from the end of the month is not supported; list the days, or use a CronJob")
		}
		days := make([]string, len(s.Days))
		for i, d := range s.Days {
			days[i] = strconv.Itoa(d)
		}
		return calendar(s.Interval, s.AtTimes, strings.Join(days, ","), "*")
	case gocron.OneTimeJobSchedule:
		return oneTime(slices.Clone(s.StartAt)), nil
	}
	return nil, fmt.Errorf("%T: runs at random or unknown times cannot be matched across replicas; use a CronJob or a DurationJob", js)
}

// calendar is a DailyJob, WeeklyJob or MonthlyJob of interval 1 as crontabs, one per time of day,
// in the location of its times (the scheduler's). An interval above 1 counts from each replica's
// start, so replicas would not agree on the days.
func calendar(interval uint, at []time.Time, dom, dow string) (schedule, error) {
	if interval != 1 {
		return nil, fmt.Errorf("interval %d: intervals above 1 count from each replica's start; use interval 1 or a CronJob", interval)
	}
	if len(at) == 0 {
		return nil, fmt.Errorf("no time of day")
	}
	tabs := make([]string, len(at))
	for i, t := range at {
		tabs[i] = fmt.Sprintf("%d %d %d %s * %s", t.Second(), t.Minute(), t.Hour(), dom, dow)
	}
	return parseCrontabs(at[0].Location(), tabs...)
}

// crontabs is the union of crontabs parsed by gocron's own cron implementation (robfig/cron), so
// that activations are the scheduler's. Their activations fall on whole seconds, so the window
// (tolerance either side of a firing) holds at most one of them.
type crontabs []gocron.Cron

func parseCrontabs(loc *time.Location, tabs ...string) (crontabs, error) {
	cs := make(crontabs, len(tabs))
	for i, tab := range tabs {
		c := gocron.NewDefaultCron(true) // seconds optional: five fields read as gocron reads them
		if err := c.IsValid(tab, loc, time.Now()); err != nil {
			return nil, fmt.Errorf("crontab %q: %w", tab, err)
		}
		cs[i] = c
	}
	return cs, nil
}

// next is the first activation after t, or the zero time.
func (cs crontabs) next(t time.Time) time.Time {
	var first time.Time
	for _, c := range cs {
		if n := c.Next(t); !n.IsZero() && (first.IsZero() || n.Before(first)) {
			first = n
		}
	}
	return first
}

func (cs crontabs) nearest(now time.Time) (time.Time, bool) {
	t := cs.next(now.Add(-tolerance)) // after now - tolerance
	if t.IsZero() || t.After(now.Add(tolerance)) {
		return time.Time{}, false
	}
	return t, true
}

func (crontabs) window() time.Duration { return tolerance }

func (cs crontabs) gap(tick time.Time) time.Duration {
	if n := cs.next(tick); !n.IsZero() {
		return n.Sub(tick)
	}
	return 0
}

// every is a DurationJob's period, its activations the multiples of it since the Unix epoch (NewJob
// starts the job on one).
type every time.Duration

// align returns the latest activation of a period d at or before t.
func align(t time.Time, d time.Duration) time.Time {
	n := t.UnixNano()
	r := n % int64(d)
	if r < 0 {
		r += int64(d)
	}
	return time.Unix(0, n-r).In(t.Location())
}

func (e every) nearest(now time.Time) (time.Time, bool) {
	d := time.Duration(e)
	t := align(now, d)
	if now.Sub(t)*2 >= d {
		t = t.Add(d)
	}
	return t, now.Sub(t).Abs() <= e.window()
}

func (e every) window() time.Duration { return min(time.Duration(e)/2, tolerance) }

func (e every) gap(time.Time) time.Duration { return time.Duration(e) }

// oneTime is a OneTimeJob's start times, sorted.
type oneTime []time.Time

func (o oneTime) nearest(now time.Time) (time.Time, bool) {
	var best time.Time
	for _, t := range o {
		if d := now.Sub(t).Abs(); d <= tolerance && (best.IsZero() || d < now.Sub(best).Abs()) {
			best = t
		}
	}
	return best, !best.IsZero()
}

func (oneTime) window() time.Duration { return tolerance }

func (o oneTime) gap(tick time.Time) time.Duration {
	for _, t := range o {
		if t.After(tick) {
			return t.Sub(tick)
		}
	}
	return 0
}

// probe returns the schedule of a job on def with opts (gocron.Job.Schedule), and whether it runs
// once at once, off its schedule (gocron.WithStartImmediately, OneTimeJobStartImmediately), or
// gocron's error. gocron keeps the latter to itself, so the job is tried on a scheduler of its
// own: on a clock that stands still at a time no start option can name (a nanosecond before now,
// when a start may not be before now), with an elector that lets no run through, so that nothing
// of the job runs and no listener is called. Such a job's first run is due at that very time; any
// other's later. The schedule is read before the job is on its real scheduler, so that a run due
// at once there finds it.
func probe(def gocron.JobDefinition, opts []gocron.JobOption, now time.Time, loc *time.Location) (gocron.JobSchedule, bool, error) {
	at := now.Add(-time.Nanosecond)
	stop := make(chan struct{})
	s, err := gocron.NewScheduler(gocron.WithClock(clockwork.NewFakeClockAt(at)), gocron.WithLocation(loc),
		gocron.WithDistributedElector(closedElector(stop)))
	if err != nil {
		return nil, false, err
	}
	defer func() {
		close(stop)
		_ = s.Shutdown() // nothing runs: no job to wait for
	}()
	j, err := s.NewJob(def, gocron.NewTask(func() {}), opts...)
	if err != nil {
		return nil, false, err
	}
	s.Start() // returns once every job's first run is set
	next, err := j.NextRun()
	return j.Schedule(), err == nil && next.Equal(at), nil
}

// closedElector is the elector of the scheduler that probe tries a job on: IsLeader
// waits until the channel is closed (or its context ends), so that a run let into the scheduler
// cannot change the job's runs while they are read, and then refuses.
type closedElector chan struct{}

func (e closedElector) IsLeader(ctx context.Context) error {
	select {
	case <-e:
	case <-ctx.Done():
	}
	return ErrNotLeader
}
