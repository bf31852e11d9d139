package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/exactlyonce"
)

// namespace holds every job's lock (core.InNamespace): nothing that takes names from clients can
// hold one.
const namespace = "gocron"

// maxJobName keeps job names within core's limit of 1024 bytes for a lock name.
const maxJobName = 1000

// Locker runs the jobs added with NewJob under lockkit locks taken per run of a job: each run
// (each activation of the job's schedule) runs on one replica only, once, whatever the clock skew
// between the replicas' schedulers. Use one Locker per scheduler; it is safe for concurrent use.
//
// A Locker is deliberately no gocron.Locker: gocron's own options (gocron.WithDistributedLocker,
// gocron.WithDistributedJobLocker) pass a locker only the job's name, from which no replica can
// tell which run is due, so such a job could never run once per run; giving them a *Locker does
// not compile. NewJob installs the Locker's lock on each job it adds.
type Locker struct {
	store *exactlyonce.Store
	opt   options
	mu    sync.Mutex
	jobs  map[string]*job // by name, the jobs added with NewJob
}

// job is a job added with NewJob.
type job struct {
	name  string
	sched schedule // set before the job is on its scheduler
	fn    func(ctx context.Context) error
	gj    gocron.Job
	held  *run // the run between its Lock and its Unlock on this replica; guarded by Locker.mu
}

// NewLocker returns a Locker that takes its locks with c. It sends nothing to Redis. An invalid
// option, or one that applies to an Elector only, gives an error matching ErrInvalid.
func NewLocker(c *core.Client, opts ...Option) (*Locker, error) {
	if c == nil {
		return nil, invalid("NewLocker needs a *core.Client")
	}
	o, err := build(opts, "NewLocker", electorOnly)
	if err != nil {
		return nil, err
	}
	// Markers are written with their own TTL (markerTTL); Retention is only the store's required
	// default.
	store, err := exactlyonce.New(c, exactlyonce.Config{Component: "gocronlock", Namespace: namespace,
		RecordPrefix: c.Prefix() + "gocron:", TTL: o.TTL, Retention: time.Minute, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return &Locker{store: store, opt: o, jobs: map[string]*job{}}, nil
}

// NewJob adds a job to s under name, on the schedule def, so that each of its runs runs on one
// replica only, and returns it as s.NewJob does. Every replica adds the same job under the same
// name; no two jobs of a Locker may share one. name must not be empty, longer than 1000 bytes or
// contain '{' or '}'.
//
// NewJob adds gocron.WithName(name) and gocron.WithDistributedJobLocker with the Locker's lock to
// opts, so s needs no locker of its own (and a gocron.WithDistributedElector on s would take
// precedence: the job then fails with ErrNotLocked); it starts a DurationJob on a multiple
// of its period since the Unix epoch, so that replicas started at different moments agree on its
// runs. job gets the lock's context: cancelled when the lock is lost, the run reaches its maximum
// hold (WithMaxHold) or the scheduler stops the job, and carrying the run's activation (Tick) and
// the lock (core.FromContext, whose Fence grows with every run). Its error is returned to gocron;
// a panic is let through to gocron after the run is marked done.
//
// Supported definitions: CronJob (except "@every", whose runs count from each replica's start:
// use a DurationJob), DurationJob (at least 1ms), DailyJob, WeeklyJob and MonthlyJob of interval 1
// (MonthlyJob without days counted from the end), OneTimeJob. Others, and a job that starts
// immediately (gocron.WithStartImmediately, gocron.OneTimeJobStartImmediately: that first run is
// each replica's own, and the later runs count from it), give an error matching ErrInvalid, and
// no job is added. WithIntervalFromCompletion moves runs off the schedule: each such run is
// refused with ErrOffSchedule, and logged. Every refused run is logged (WithLogger): ErrDone and
// ErrBusy, a replica's ordinary share, at Debug; any other at Error.
func (l *Locker) NewJob(s gocron.Scheduler, def gocron.JobDefinition, name string, job func(ctx context.Context) error, opts ...gocron.JobOption) (gocron.Job, error) {
	if s == nil || def == nil || job == nil {
		return nil, invalid("nil scheduler, definition or job")
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	js, immediate, err := probe(def, opts, l.opt.clock(), l.opt.loc)
	if err != nil {
		return nil, err
	}
	if immediate {
		return nil, invalid("job %q starts immediately (gocron.WithStartImmediately or OneTimeJobStartImmediately): "+
			"that run is each replica's own, not an activation of the schedule", name)
	}
	sched, err := scheduleOf(js, l.opt.loc)
	if err != nil {
		return nil, invalid("job %q: %v", name, err)
	}
	j, err := l.reserve(name, job, sched)
	if err != nil {
		return nil, err
	}
	gj, err := l.add(s, def, j, opts)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		delete(l.jobs, name)
		return nil, err
	}
	j.gj = gj
	return gj, nil
}

// reserve registers name for a new job, unless a job of that name is still on its scheduler.
func (l *Locker) reserve(name string, fn func(ctx context.Context) error, sched schedule) (*job, error) {
	l.mu.Lock()
	old := l.jobs[name]
	var oldJob gocron.Job
	if old != nil {
		oldJob = old.gj
	}
	l.mu.Unlock()
	if old != nil {
		if oldJob == nil {
			return nil, invalid("job %q is being added", name)
		}
		// A job removed from its scheduler (or whose scheduler shut down) frees its name.
		if _, err := oldJob.LastRunStartedAt(); !errors.Is(err, gocron.ErrJobNotFound) {
			return nil, invalid("a job named %q was added already", name)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.jobs[name] != old {
		return nil, invalid("job %q is being added", name)
	}
	j := &job{name: name, fn: fn, sched: sched}
	l.jobs[name] = j
	return j, nil
}

// add creates the job on s, its schedule known already: a run due at once finds it. A DurationJob
// starts on a multiple of its period since the epoch.
func (l *Locker) add(s gocron.Scheduler, def gocron.JobDefinition, j *job, opts []gocron.JobOption) (gocron.Job, error) {
	opts = append(opts[:len(opts):len(opts)], gocron.WithName(j.name), gocron.WithDistributedJobLocker(jobLocker{l}))
	if e, ok := j.sched.(every); ok {
		start := align(l.opt.clock(), time.Duration(e))
		opts = append(opts, gocron.WithStartAt(gocron.WithStartDateTimePast(start)))
	}
	return s.NewJob(def, gocron.NewTask(l.task(j)), opts...)
}

func validName(name string) error {
	switch {
	case name == "":
		return invalid("empty job name")
	case len(name) > maxJobName:
		return invalid("job name is %d bytes, longer than %d", len(name), maxJobName)
	case strings.ContainsAny(name, "{}"):
		return invalid("job name %q contains '{' or '}'", name)
	}
	return nil
}

// jobLocker is the gocron.Locker that NewJob installs on each job it adds
// (gocron.WithDistributedJobLocker): the Locker itself is none, so that gocron's options cannot
// take it for a scheduler's jobs, which it could not serve.
type jobLocker struct{ l *Locker }

// Lock implements gocron.Locker: gocron calls it with the job's context and name when a run of
// the job is due, runs the job if it returns a lock and calls the lock's Unlock when the job
// returns. On an error gocron skips the run and passes the error only to the job's AfterLockError
// listener, so every refusal is logged too: ErrDone and ErrBusy at Debug, any other at Error.
func (jl jobLocker) Lock(ctx context.Context, name string) (gocron.Lock, error) {
	lk, err := jl.l.lock(ctx, name)
	if err != nil {
		level := slog.LevelError
		if errors.Is(err, ErrDone) || errors.Is(err, ErrBusy) || ctx.Err() != nil {
			level = slog.LevelDebug
		}
		jl.l.opt.Log().LogAttrs(context.WithoutCancel(ctx), level, "lockkit: gocronlock: run refused",
			slog.String("job", name), slog.Any("error", err))
	}
	return lk, err
}

// lock matches the run to the job's activation nearest to the Locker's clock, then takes the
// job's lock guarded by the run's completion marker, in one round trip. Errors: ErrDone (another
// replica ran it), ErrBusy (another run holds the job's lock), ErrOffSchedule, ErrInvalid (a job
// not added with NewJob), core.ErrUnavailable and core.ErrClosed.
func (l *Locker) lock(ctx context.Context, key string) (gocron.Lock, error) {
	l.mu.Lock()
	j := l.jobs[key]
	switch {
	case j == nil:
		l.mu.Unlock()
		return nil, invalid("no job %q was added with Locker.NewJob", key)
	case j.held != nil:
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: job %q: a run is still going on this replica", ErrBusy, key)
	}
	r := &run{l: l, j: j}
	j.held = r
	l.mu.Unlock()

	now := l.opt.clock()
	tick, ok := j.sched.nearest(now)
	if !ok {
		r.free()
		return nil, fmt.Errorf("%w: job %q at %v: no activation within %v", ErrOffSchedule, key, now, j.sched.window())
	}
	r.tick = tick
	r.req = l.tickRequest(j.name, tick)
	r.req.Acquire = []core.AcquireOption{core.WithMaxHold(l.maxHold(j.sched, tick))}
	er, rec, err := l.store.Begin(ctx, r.req)
	if er == nil {
		r.free()
		switch {
		case rec != nil:
			return nil, fmt.Errorf("%w: job %q, run %s", ErrDone, key, tick.Format(time.RFC3339Nano))
		case errors.Is(err, exactlyonce.ErrInFlight):
			return nil, fmt.Errorf("%w: job %q, run %s: %w", ErrBusy, key, tick.Format(time.RFC3339Nano), err)
		}
		return nil, fmt.Errorf("lockkit: gocronlock: job %q, run %s: %w", key, tick.Format(time.RFC3339Nano), err)
	}
	r.mu.Lock()
	r.er = er
	r.mu.Unlock()
	return r, nil
}

// maxHold is the WithMaxHold of a run at tick: the option's, or the larger of the gap and the TTL.
func (l *Locker) maxHold(s schedule, tick time.Time) time.Duration {
	if l.opt.Has("WithMaxHold") {
		return l.opt.maxHold
	}
	return max(s.gap(tick), l.opt.TTL)
}

// markerTTL is how long the completion marker of the run at tick stays, written at now: until
// WithMaxSkew plus the firing window after the activation, when no replica whose clock is within
// the skew can still fire for it. It is at least a second.
func (l *Locker) markerTTL(s schedule, tick, now time.Time) time.Duration {
	return max(tick.Add(l.opt.maxSkew+s.window()).Sub(now), time.Second)
}
