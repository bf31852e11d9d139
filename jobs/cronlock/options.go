package cronlock

import (
	"log/slog"
	"time"

	"github.com/lockkit/lockkit/election"
	"github.com/redis/go-redis/v9"
)

// Option configures a Locker.
type Option func(*options)

type options struct {
	ttl        time.Duration
	namespace  string
	clock      func() time.Time
	rdb        redis.UniversalClient // WithRedisTime
	logger     *slog.Logger
	hook       func(Event)
	retryError bool
	maxHold    time.Duration // WithMaxHold; -1: the default (the larger of the period and the TTL)
	leader     *election.Election
	leaderSet  bool // WithLeader was given (nil is invalid)
}

func defaultOptions() options {
	return options{ttl: 30 * time.Second, clock: time.Now, namespace: "cron", maxHold: -1}
}

// WithTTL sets the TTL of a job's lock (default 30s, allowed core.MinTTL to core.MaxTTL). While the
// job runs, the core.Client's watchdog renews the lock every third of the TTL, so a run may last
// longer (up to WithMaxHold); the TTL is how long a replica that dies mid-run keeps the job from
// running elsewhere. Keep it a few times the worst Redis round trip, and short next to the
// schedule's period.
func WithTTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// WithNamespace sets the core namespace of the jobs' locks (default "cron": job JOB locks
// "@cron/JOB", see core.InNamespace). Nothing outside the namespace can hold a job's lock; give
// another component the same namespace (httpmw.WithNamespace, grpcmw.WithNamespace) only to make
// it exclude a job on purpose. 1 to 64 of a-z, 0-9 and '-'.
func WithNamespace(ns string) Option { return func(o *options) { o.namespace = ns } }

// WithClock sets the clock the tick is derived from (default time.Now), for tests that simulate
// skewed replicas. It should return times in the location of the cron's schedules.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// WithRedisTime derives the tick from the Redis server's clock (the TIME command on rdb) instead of
// the local one, so that every replica reads the same clock. It costs one more round trip per
// replica and tick. Of little use on a Cluster client, whose TIME goes to an arbitrary node. It
// replaces WithClock.
func WithRedisTime(rdb redis.UniversalClient) Option { return func(o *options) { o.rdb = rdb } }

// WithLogger logs every run and skip (default: no logging): a run at Info, a skip at Debug and
// failures at Error, with the attributes job, tick, outcome, fence, duration and error.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithHook calls fn once per firing of a job on this replica, after the run or the skip, with what
// happened. fn runs on the job's goroutine and should be quick.
func WithHook(fn func(Event)) Option { return func(o *options) { o.hook = fn } }

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
func WithMaxHold(d time.Duration) Option { return func(o *options) { o.maxHold = d } }
