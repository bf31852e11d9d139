package cronlock

import (
	"log/slog"
	"time"

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
}

func defaultOptions() options {
	return options{ttl: 30 * time.Second, clock: time.Now, namespace: "cron"}
}

// WithTTL sets the TTL of a job's lock (default 30s, allowed core.MinTTL to core.MaxTTL): the lockAtMostFor of
// ShedLock. While the job runs, the core.Client's watchdog renews the lock every third of the TTL, so
// a run may last longer; the TTL is how long a replica that dies mid-run keeps the job from running
// elsewhere. Keep it a few times the worst Redis round trip, and short next to the schedule's period.
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
