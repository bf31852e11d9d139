package cronlock

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/exactlyonce"
	"github.com/robfig/cron/v3"
)

// Outcomes of a firing, in Event.Outcome.
const (
	// OutcomeRan: this replica ran the job for the tick and it returned nil.
	OutcomeRan = "ran"
	// OutcomeFailed: this replica ran the job and it returned an error or panicked (Err).
	OutcomeFailed = "failed"
	// OutcomeLost: the job's lock was lost while the job ran (Err matches core.ErrLost); its context
	// was cancelled and no completion marker was written.
	OutcomeLost = "lost"
	// OutcomeMaxHold: the run reached its maximum hold (WithMaxHold) and its lock was released: the
	// job's context was cancelled with a cause matching core.ErrMaxHold (Err matches it too) and no
	// completion marker was written.
	OutcomeMaxHold = "max_hold"
	// OutcomeDone: skipped, the tick has run already (its completion marker exists).
	OutcomeDone = "done"
	// OutcomeBusy: skipped, another replica holds the job's lock: it is running this tick, or a run of
	// an earlier tick is still going, or a replica died mid-run and its lock has not expired yet.
	OutcomeBusy = "busy"
	// OutcomeError: not run, because of Err: Redis could not be reached, the Locker was stopped
	// (ErrStopped) or the schedule has no activation.
	OutcomeError = "error"
)

// Event describes one firing of a job on this replica; see WithHook.
type Event struct {
	// Job is the job's name.
	Job string
	// Tick is the activation the replica fired for (zero if it could not be derived).
	Tick time.Time
	// Outcome is one of the Outcome constants.
	Outcome string
	// Fence is the fencing token of the job's lock when this replica ran the job: it increases with
	// every run of the job on any replica (in leader mode: the term's fence, which increases with
	// every term). Zero when skipped.
	Fence int64
	// Duration is how long the job ran; zero when skipped.
	Duration time.Duration
	// Err is the job's error (a *PanicError if it panicked), the loss of the lock, or the error that
	// kept the job from running. With OutcomeRan it is the error of the release, if the completion
	// marker could not be written.
	Err error
}

// job is a cron.Job run under a Locker.
type job struct {
	l     *Locker
	name  string // job name, the lock's name in the Locker's namespace
	sched cron.Schedule
	loc   *time.Location // location of the cron (Add), nil to keep the clock's
	inner cron.Job
	// running is set while the job runs in leader mode (a run still going skips the next firing).
	running atomic.Bool
}

func (l *Locker) newJob(name string, s cron.Schedule, inner cron.Job) *job {
	return &job{l: l, name: name, sched: s, inner: inner}
}

// markerKind is the kind of a completion marker among exactlyonce records; its payload is "ok" or
// "failed".
const markerKind = 'm'

// tickRequest is the exactly-once request of a tick: the job's lock, and the tick's marker as the
// record, whose key carries the lock's hash tag followed by the tick (PREFIX cron:{@cron/JOB}:TICK)
// and whose fingerprint is the tick's.
func (j *job) tickRequest(tick time.Time) *exactlyonce.Request {
	unix := strconv.FormatInt(tick.Unix(), 10)
	fp := sha256.Sum256([]byte(unix))
	return &exactlyonce.Request{
		Key:         j.l.store.KeyNamed(j.name, ":"+unix),
		Fingerprint: func() ([32]byte, error) { return fp, nil },
	}
}

// Run derives the tick, takes the job's lock guarded by the tick's marker, runs the job and
// releases the lock writing the marker.
func (j *job) Run() {
	l := j.l
	ev := Event{Job: j.name}
	if l.base.Err() != nil {
		ev.Outcome, ev.Err = OutcomeError, ErrStopped
		l.report(l.base, &ev)
		return
	}
	now, err := l.now(l.base)
	if err != nil {
		ev.Outcome, ev.Err = OutcomeError, err
		l.report(l.base, &ev)
		return
	}
	derived := time.Now()
	if j.loc != nil {
		now = now.In(j.loc)
	}
	tick := nearest(j.sched, now)
	if tick.IsZero() {
		ev.Outcome, ev.Err = OutcomeError, invalid("schedule of job %q has no activation", j.name)
		l.report(l.base, &ev)
		return
	}
	ev.Tick = tick
	if l.opt.leader != nil {
		j.runAsLeader(&ev)
		return
	}
	req := j.tickRequest(tick)
	req.Acquire = []core.AcquireOption{core.WithMaxHold(maxHold(l.opt.maxHold, l.opt.TTL, j.sched, tick))}
	ctx := context.WithValue(l.base, tickKey{}, tick)
	run, done, err := l.store.Begin(ctx, req)
	if run == nil {
		switch {
		case done != nil:
			ev.Outcome = OutcomeDone
		case errors.Is(err, exactlyonce.ErrInFlight):
			ev.Outcome = OutcomeBusy
		default:
			ev.Outcome, ev.Err = OutcomeError, err
		}
		l.report(ctx, &ev)
		return
	}
	lock := run.Lock()
	ev.Fence = lock.Fence()
	start := time.Now()
	jobErr := j.call(run.Context())
	ev.Duration = time.Since(start)
	ev.Outcome, ev.Err = OutcomeRan, jobErr
	if jobErr != nil {
		ev.Outcome = OutcomeFailed
	}
	// Release even if the Locker was stopped: the marker is what keeps the tick from running twice.
	// A lost lock (or one released by Client.Close) writes nothing: the store returns the cause.
	var relErr error
	if jobErr != nil && l.opt.retryError {
		relErr = run.Release(ctx, "")
	} else {
		val := "ok"
		if jobErr != nil {
			val = "failed"
		}
		fp, _ := req.Fingerprint()
		relErr = run.Store(ctx, exactlyonce.Encode(markerKind, fp, []byte(val)),
			markerTTL(j.sched, tick, now.Add(time.Since(derived))))
	}
	switch {
	case errors.Is(relErr, core.ErrMaxHold):
		ev.Outcome = OutcomeMaxHold
	case errors.Is(relErr, core.ErrLost) || errors.Is(relErr, core.ErrNotHeld):
		ev.Outcome = OutcomeLost
	}
	if relErr != nil {
		ev.Err = errors.Join(jobErr, relErr)
	}
	l.report(run.Context(), &ev)
}

// call runs the wrapped job, turning a panic into a *PanicError.
func (j *job) call(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			buf := make([]byte, 64<<10)
			err = &PanicError{Value: r, Stack: buf[:runtime.Stack(buf, false)]}
		}
	}()
	if f, ok := j.inner.(Func); ok {
		return f(ctx)
	}
	j.inner.Run()
	return nil
}

// now reads the clock ticks are derived from.
func (l *Locker) now(ctx context.Context) (time.Time, error) {
	if l.opt.rdb == nil {
		return l.opt.clock(), nil
	}
	t, err := l.opt.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: TIME: %w", core.ErrUnavailable, err)
	}
	return t, nil
}

// report logs ev and passes it to the hook.
func (l *Locker) report(ctx context.Context, ev *Event) {
	level := slog.LevelError
	switch {
	case ev.Outcome == OutcomeRan && ev.Err == nil, ev.Outcome == OutcomeDone, ev.Outcome == OutcomeBusy,
		errors.Is(ev.Err, ErrStopped):
		level = slog.LevelDebug
	}
	if lg := l.opt.Log(); lg.Enabled(ctx, level) {
		attrs := make([]slog.Attr, 0, 6)
		attrs = append(attrs, slog.String("job", ev.Job), slog.String("outcome", ev.Outcome))
		if !ev.Tick.IsZero() {
			attrs = append(attrs, slog.Time("tick", ev.Tick))
		}
		if ev.Fence != 0 {
			attrs = append(attrs, slog.Int64("fence", ev.Fence), slog.Duration("duration", ev.Duration))
		}
		if ev.Err != nil {
			attrs = append(attrs, slog.Any("error", ev.Err))
		}
		lg.LogAttrs(context.WithoutCancel(ctx), level, "lockkit: cronlock: "+ev.Outcome, attrs...)
	}
	if l.opt.hook != nil {
		l.opt.hook(*ev)
	}
}
