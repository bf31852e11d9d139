package cronlock

import (
	"log/slog"
	"reflect"
	"time"

	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/adapter"
	"github.com/redis/go-redis/v9"
)

// Option configures a Locker.
type Option func(*options)

type options struct {
	adapter.Options // TTL, logger, namespace; a tick tries once (adapter.DefaultWait)
	clock           func() time.Time
	rdb             redis.UniversalClient // WithRedisTime
	hook            func(Event)
	retryError      bool
	maxHold         time.Duration // WithMaxHold; -1: the default (the larger of the period and the TTL)
	leader          *election.Election
}

func defaultOptions() options {
	return options{Options: adapter.New("cronlock", 30*time.Second, "cron"), clock: time.Now, maxHold: -1}
}

// validate checks o, with the wording of every adapter.
func (o *options) validate() error {
	switch {
	case o.clock == nil:
		return invalid("WithClock(nil)")
	case o.Has("WithRedisTime") && isNil(o.rdb):
		return invalid("WithRedisTime(nil)")
	case o.Has("WithHook") && o.hook == nil:
		return invalid("WithHook(nil)")
	case o.maxHold < -1 || o.Has("WithMaxHold") && o.maxHold < 0:
		return invalid("WithMaxHold(%v) is negative", o.maxHold)
	case o.Has("WithLeader") && o.leader == nil:
		return invalid("WithLeader(nil)")
	case o.leader != nil && o.retryError:
		return invalid("RetryOnError does not apply in leader mode (WithLeader): no completion marker is written")
	}
	return o.Options.Validate("New")
}

// WithTTL sets the TTL of a job's lock (default 30s, allowed core.MinTTL to core.MaxTTL). While the
// job runs, the core.Client's watchdog renews the lock every third of the TTL, so a run may last
// longer (up to WithMaxHold); the TTL is how long a replica that dies mid-run keeps the job from
// running elsewhere. Keep it a few times the worst Redis round trip, and short next to the
// schedule's period.
func WithTTL(d time.Duration) Option { return func(o *options) { o.SetTTL(d) } }

// WithNamespace sets the core namespace of the jobs' locks (default "cron": job JOB locks
// "@cron/JOB", see core.InNamespace). Nothing outside the namespace can hold a job's lock; give
// another component the same namespace (httpmw.WithNamespace, grpcmw.WithNamespace) only to make
// it exclude a job on purpose. 1 to 64 of a-z, 0-9 and '-'.
func WithNamespace(ns string) Option { return func(o *options) { o.SetNamespace(ns) } }

// WithClock sets the clock the tick is derived from (default time.Now), for tests that simulate
// skewed replicas. It should return times in the location of the cron's schedules.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// WithRedisTime derives the tick from the Redis server's clock (the TIME command on rdb) instead of
// the local one, so that every replica reads the same clock. It costs one more round trip per
// replica and tick. Of little use on a Cluster client, whose TIME goes to an arbitrary node. It
// replaces WithClock. rdb must not be nil.
func WithRedisTime(rdb redis.UniversalClient) Option {
	return func(o *options) {
		o.rdb = rdb
		o.Given("WithRedisTime")
	}
}

// isNil reports whether rdb is nil, or a nil pointer of a client type.
func isNil(rdb redis.UniversalClient) bool {
	if rdb == nil {
		return true
	}
	v := reflect.ValueOf(rdb)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// WithLogger sets where the Locker logs (default, and nil: slog.Default(), read when a message is
// logged; slog.New(slog.DiscardHandler) silences it): a failure (a job's error or panic, a lost
// lock, a completion marker not written, Redis unreachable) at Error, a run and a skip at Debug,
// with the attributes job, tick, outcome, fence, duration and error; in leader mode, a campaign
// that failed or a leadership lost at Warn.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.SetLogger(l) } }

// WithHook calls fn once per firing of a job on this replica, after the run or the skip, with what
// happened. fn runs on the job's goroutine and should be quick. fn must not be nil.
func WithHook(fn func(Event)) Option {
	return func(o *options) {
		o.hook = fn
		o.Given("WithHook")
	}
}

// RetryOnError leaves no completion marker when a job returns an error or panics, so that a replica
// firing later for the same tick (one with a skewed clock or a late timer) runs it again. Nothing
// retries on its own; the default writes the marker anyway, keeping each tick to at most one run.
func RetryOnError() Option { return func(o *options) { o.retryError = true } }

// WithMaxHold bounds how long one run may hold the job's lock, even while its replica keeps
// renewing it: ShedLock's lockAtMostFor. When d passes, the job's context is cancelled with a cause
// matching core.ErrMaxHold, the lock is released without a completion marker and the firing is
// reported as OutcomeMaxHold; a job that keeps running after that runs unlocked. d = 0 sets no
// limit (a hung run then holds the job for as long as its process lives).
//
// Default: the larger of the schedule's period at the tick (the time from the tick to the next
// activation) and the TTL (WithTTL). A run is never cut before its next tick is due, so jobs that
// fit their schedule are untouched; a run that hangs keeps the job from running for about one
// tick, not for ever. A job that legitimately runs longer than its period (the ticks meanwhile are
// skipped as busy) needs a larger d, or 0.
func WithMaxHold(d time.Duration) Option {
	return func(o *options) {
		o.maxHold = d
		o.Given("WithMaxHold")
	}
}
