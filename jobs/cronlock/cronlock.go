package cronlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/adapter"
	"github.com/lockkit/lockkit/internal/exactlyonce"
	"github.com/robfig/cron/v3"
)

var (
	// ErrInvalid means an argument was rejected: a bad spec, job name or option. Errors matching it
	// match core.ErrInvalid too, and read "lockkit: cronlock: what is wrong".
	ErrInvalid = adapter.Sentinel("cronlock")
	// ErrStopped is the cause of a job's context after Locker.Stop, and the error of every firing
	// after it.
	ErrStopped = errors.New("lockkit: cronlock: stopped")
)

// PanicError is the error reported when a job panics; the panic does not reach the scheduler.
type PanicError struct {
	// Value is what the job panicked with, and Stack the goroutine's stack at the panic.
	Value any
	Stack []byte
}

// Error describes the panic.
func (e *PanicError) Error() string {
	return fmt.Sprintf("lockkit: cronlock: job panicked: %v", e.Value)
}

// maxJobName keeps job names within core's limit of 1024 bytes for a lock name.
const maxJobName = 1000

// Locker makes each tick of a cron job run on exactly one of the replicas that schedule it. Create
// one per process with New, register jobs with Add (or wrap them with Wrap) and call Stop when the
// cron stops. It is safe for concurrent use.
type Locker struct {
	store  *exactlyonce.Store
	opt    options
	base   context.Context // parent of every job's context; cancelled by Stop
	cancel context.CancelCauseFunc
	term   atomic.Pointer[election.Term] // leader mode: the current term, nil while following
	done   chan struct{}                 // leader mode: closed when the campaign ended (after Stop)
}

// New returns a Locker that takes its locks with c. It sends nothing to Redis, except in leader
// mode (WithLeader), where it starts campaigning. An invalid option gives an error matching
// ErrInvalid and core.ErrInvalid.
func New(c *core.Client, opts ...Option) (*Locker, error) {
	if c == nil {
		return nil, invalid("New needs a *core.Client")
	}
	o := defaultOptions()
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	// Markers are written with their own TTL (markerTTL); Retention is only the store's required
	// default.
	store, err := exactlyonce.New(c, exactlyonce.Config{Component: "cronlock", Namespace: o.Namespace,
		RecordPrefix: c.Prefix() + "cron:", TTL: o.TTL, Retention: time.Minute, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	base, cancel := context.WithCancelCause(context.Background())
	l := &Locker{store: store, opt: o, base: base, cancel: cancel}
	if o.leader != nil {
		l.done = make(chan struct{})
		go l.campaign()
	}
	return l, nil
}

// invalid returns the error of an invalid argument: "lockkit: cronlock: WHAT", matching
// ErrInvalid and core.ErrInvalid.
func invalid(format string, args ...any) error { return adapter.Invalid("cronlock", format, args...) }

// Stop cancels the context of every running job (cause ErrStopped) and makes every later firing
// a no-op reported with ErrStopped. Call it after cron.Cron.Stop and before waiting on the context
// that Stop returns, so that jobs watching their context end promptly:
//
//	ctx := c.Stop()
//	locker.Stop()
//	<-ctx.Done()
//
// A job interrupted this way still leaves its completion marker (unless RetryOnError). In leader
// mode Stop also resigns leadership, so that another replica takes over at once, and returns when
// the campaign has ended.
func (l *Locker) Stop() {
	l.cancel(ErrStopped)
	if l.done != nil {
		<-l.done
	}
}

// Func is a job that takes a context and returns an error, the form Add registers. Wrapped by a
// Locker, it gets the context of the job's lock: cancelled when the lock is lost or the Locker
// stopped, and carrying the tick (see Tick). Its Run method makes it a cron.Job on its own, run with
// context.Background and its error dropped.
type Func func(ctx context.Context) error

// Run runs f with context.Background, ignoring its error.
func (f Func) Run() { _ = f(context.Background()) }

// Add registers job on c under name, on the schedule spec, so that each tick runs on one replica
// only. spec takes the standard five fields, an optional leading seconds field (as with
// cron.WithSeconds) or a descriptor ("@hourly", "@every 10s"); "@every" is aligned to the epoch (see
// Every). Schedules are evaluated in c's location. name identifies the job across replicas: every
// replica must use the same name for the same job, and no two jobs may share one. It must not be
// empty, longer than 1000 bytes or contain '{' or '}'.
func (l *Locker) Add(c *cron.Cron, spec, name string, job func(ctx context.Context) error) (cron.EntryID, error) {
	if c == nil || job == nil {
		return 0, invalid("Add needs a *cron.Cron and a job")
	}
	if err := validName(name); err != nil {
		return 0, err
	}
	s, err := parseSpec(spec)
	if err != nil {
		return 0, invalid("spec %q: %v", spec, err)
	}
	j := l.newJob(name, s, Func(job))
	j.loc = c.Location()
	return c.Schedule(s, j), nil
}

// Wrap returns a cron.JobWrapper that runs the wrapped job at most once per tick of s across the
// replicas, under name (see Add for the rules on names). s must be the schedule the job is
// registered with, or one with the same activations: the wrapper derives the tick from it. Register
// "@every" jobs with Every, not cron.Every, so that replicas agree on the ticks. If the wrapped job is
// a Func, it gets the lock's context and its error is reported; another cron.Job is just run.
// Schedules are evaluated in the location of the clock (time.Local by default); a cron created with
// cron.WithLocation needs a schedule with a CRON_TZ= prefix, or Add. Wrap panics on an invalid name
// or a nil schedule, as a JobWrapper cannot return an error.
func (l *Locker) Wrap(name string, s cron.Schedule) cron.JobWrapper {
	if err := validName(name); err != nil {
		panic(err)
	}
	if s == nil {
		panic(invalid("Wrap needs the schedule of job %q", name))
	}
	return func(inner cron.Job) cron.Job { return l.newJob(name, s, inner) }
}

// Tick returns the tick a job wrapped by a Locker runs for, from the job's context.
func Tick(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(tickKey{}).(time.Time)
	return t, ok
}

type tickKey struct{}

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
