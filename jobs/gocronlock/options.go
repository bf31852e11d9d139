package gocronlock

import (
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/internal/adapter"
)

// Option configures a Locker (NewLocker) or an Elector (NewElector). Each option says which it
// applies to; the other constructor rejects it, so that no option is silently ignored.
type Option func(*options)

type options struct {
	adapter.Options               // TTL, logger; the namespace is "gocron", a run tries once
	maxHold         time.Duration // when Has("WithMaxHold"); else the larger of the period and the TTL
	maxSkew         time.Duration
	clock           func() time.Time
	loc             *time.Location
	value           string
}

// Options that apply to one constructor only.
var (
	lockerOnly  = []string{"WithTTL", "WithMaxHold", "WithMaxSkew", "WithClock", "WithLocation"}
	electorOnly = []string{"WithValue"}
)

// Defaults of the options.
const (
	// DefaultTTL is the TTL of a job's lock unless WithTTL sets another.
	DefaultTTL = 30 * time.Second
	// DefaultMaxSkew is how far replicas' clocks may drift apart unless WithMaxSkew says otherwise.
	DefaultMaxSkew = time.Minute
)

// build applies opts to the defaults and checks them for ctor; options named in notHere, which
// apply to the other constructor, are rejected.
func build(opts []Option, ctor string, notHere []string) (options, error) {
	host, _ := os.Hostname()
	o := options{Options: adapter.New("gocronlock", DefaultTTL, namespace), maxSkew: DefaultMaxSkew,
		clock: time.Now, loc: time.Local, value: host + " " + strconv.Itoa(os.Getpid())}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if err := o.Validate(ctor, notHere...); err != nil {
		return o, err
	}
	switch {
	case o.maxHold < 0:
		return o, invalid("WithMaxHold(%v) is negative", o.maxHold)
	case o.maxSkew < 0:
		return o, invalid("WithMaxSkew(%v) is negative", o.maxSkew)
	case o.clock == nil:
		return o, invalid("WithClock(nil)")
	case o.loc == nil:
		return o, invalid("WithLocation(nil)")
	}
	return o, nil
}

// option returns an Option called name that sets what set sets.
func option(name string, set func(*options)) Option {
	return func(o *options) {
		set(o)
		o.Given(name)
	}
}

// invalid returns the error of an invalid argument: "lockkit: gocronlock: WHAT", matching
// ErrInvalid and core.ErrInvalid.
func invalid(format string, args ...any) error {
	return adapter.Invalid("gocronlock", format, args...)
}

// WithTTL sets the TTL of a job's lock (Locker; default DefaultTTL, allowed core.MinTTL to
// core.MaxTTL). While the job runs, the core.Client's watchdog renews the lock every third of the
// TTL, so a run may last longer (up to WithMaxHold); the TTL is how long a replica that dies
// mid-run keeps the job from running elsewhere.
func WithTTL(d time.Duration) Option { return func(o *options) { o.SetTTL(d) } }

// WithMaxHold bounds how long one run may hold the job's lock (Locker), even while its replica
// keeps renewing it: when d passes, the job's context is cancelled with a cause matching
// core.ErrMaxHold and the lock released without a completion marker, so that the next run is not
// blocked by a run that hangs. d = 0 sets no limit; negative is invalid. Default: the larger of
// the job's period at the run (the time to its next activation) and the TTL, so that a run that
// fits its schedule is never cut.
func WithMaxHold(d time.Duration) Option {
	return option("WithMaxHold", func(o *options) { o.maxHold = d })
}

// WithMaxSkew sets how far behind the fastest replica's clock any replica's clock may be (Locker;
// default DefaultMaxSkew). A run's completion marker is kept until that long after the run's
// activation (plus the window a firing may be late by, at most half a second), so that a replica
// whose clock is behind finds it and does not run the run again. Larger skews are not caught: the
// lagging replica runs the run a second time. The cost is one small key per run and job, kept
// that long.
func WithMaxSkew(d time.Duration) Option {
	return option("WithMaxSkew", func(o *options) { o.maxSkew = d })
}

// WithClock sets the clock that firings are matched to activations with (Locker; default
// time.Now). It must read the same time as the clock of the scheduler the Locker serves
// (gocron.WithClock), as it does by default; tests that give the scheduler a fake or skewed clock
// give the Locker the same clock's Now.
func WithClock(now func() time.Time) Option {
	return option("WithClock", func(o *options) { o.clock = now })
}

// WithLocation sets the location in which crontabs without a time zone are read (Locker; default
// time.Local). It must be the scheduler's (gocron.WithLocation), whose default is time.Local too.
func WithLocation(loc *time.Location) Option {
	return option("WithLocation", func(o *options) { o.loc = loc })
}

// WithLogger sets where failures that gocron does not report are logged (both; default, and nil:
// slog.Default(), read when a message is logged; slog.New(slog.DiscardHandler) silences them): a
// completion marker that could not be written, a lock lost while its job ran, a campaign that
// failed, a leadership lost.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.SetLogger(l) } }

// WithValue sets the value an Elector campaigns with, which observers of the election see as the
// leader's (Elector; default the host name and the process id).
func WithValue(v string) Option { return option("WithValue", func(o *options) { o.value = v }) }
