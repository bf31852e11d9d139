package asynqlock

import (
	"context"

	"github.com/hibiken/asynq"
)

// LimitFunc returns how many tasks of the task's key may run at once (1 to core.MaxPermits), e.g.
// from the task's payload or headers.
type LimitFunc func(ctx context.Context, t *asynq.Task) int

// WithLimit lets up to n tasks of one key run at once, across every worker of every server (1 to
// core.MaxPermits). Each task takes one of the key's n permits of a core semaphore (core.Permits) in the
// middleware's namespace, for the TTL WithTTL gives, renewed while it runs; a task that finds all
// n taken fails with a *KeyBusyError whose RetryAfter is the earliest permit's remaining TTL (or
// waits, with WithWait or on its last attempt), exactly as a busy lock, so IsFailure and
// RetryDelayFunc keep busy tasks from using up their retries. A worker that dies frees its permit
// after the TTL.
//
// With a limit, even 1, tasks take permits, not the key's lock; one name, one lock: the permits and
// a middleware without a limit on the same key exclude each other (docs/guarantees.md). A permit is never re-entered, so a task delivered twice takes two permits.
func WithLimit(n int) Option { return func(o *options) { o.SetLimit(n) } }

// WithLimitFunc is WithLimit with a limit per task (f is called for every task with a key). All
// tasks of a key should agree on the limit; when they do not, a task runs only while fewer tasks
// than its own limit and than every running task's limit run (see core.Permits). A limit outside
// 1 to core.MaxPermits fails the task with an error matching core.ErrInvalid. Not combinable with
// WithLimit.
func WithLimitFunc(f LimitFunc) Option {
	return func(o *options) {
		o.limitFn = f
		o.Given("WithLimitFunc")
	}
}
