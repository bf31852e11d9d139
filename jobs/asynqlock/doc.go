// Package asynqlock is asynq middleware that takes a lockkit lock per task key, so that tasks with
// the same key never run at once (or at most N at once, WithLimit), across every worker of every
// server.
//
// asynq's Unique and TaskID options only deduplicate tasks when they are enqueued; two tasks for the
// same customer can still run at the same time on two workers. Middleware serialises them:
//
//	locks, _ := core.New(rdb)
//	mw, err := asynqlock.Middleware(locks, asynqlock.WithKey(asynqlock.ByJSONField("customer_id")))
//	...
//	mux := asynq.NewServeMux()
//	mux.Use(mw)
//	srv := asynq.NewServer(redisOpt, asynq.Config{
//		IsFailure:      asynqlock.IsFailure(nil),      // a busy key is no failure: no retry used up
//		RetryDelayFunc: asynqlock.RetryDelayFunc(nil), // retry a busy task when the key is due free
//	})
//
// How it behaves:
//
//   - The key comes from a KeyFunc (WithKey): ByType (the default), ByHeader, ByJSONField or your
//     own. Tasks with an empty key run without a lock. A task takes one key: the other adapters'
//     WithKeys (several keys, all or nothing) is not offered, as a set of locks cannot carry the
//     task's owner token and a task delivered twice could then not re-enter its keys. The lock is the key in the core namespace "asynq" ("@asynq/"+key,
//     see WithNamespace), which no other component's input can reach.
//   - The lock's TTL is the time left until the task's deadline, kept between a floor and a cap
//     (WithTTL, default 1s and 10s). core's watchdog renews it while the handler runs, and the
//     handler runs with the lock's context, which is cancelled if the lock is lost. A task whose lock
//     was lost fails with an error matching core.ErrLost, even if its handler returned nil.
//   - The hold ends at the task's deadline (core.WithMaxHold), even if the handler ignores its
//     context and keeps running: asynq gives up on the task then and may retry it, and the retry
//     must not find its key held by the hung run. Such a task fails with an error matching
//     core.ErrMaxHold. A task without a deadline has no maximum hold.
//   - If the key is busy the task fails with a *KeyBusyError (ErrKeyBusy) whose RetryAfter is the
//     holder's remaining TTL. With IsFailure, asynq does not count it: the task's retry count is
//     not incremented (asynq's Config.IsFailure controls exactly that, and the queue statistics).
//     With RetryDelayFunc the retry comes after RetryAfter instead of asynq's failure back-off.
//     WithWait makes the task wait for the key inside the handler instead, woken by the holder's
//     release. A task on its last attempt always waits, since asynq would archive it on any error.
//   - A task delivered twice (asynq delivers at least once) has the same task ID both times; the
//     lock's owner token is derived from the queue and task ID, so the second delivery re-enters the
//     lock instead of waiting for itself. Both deliveries then run at once: make handlers idempotent.
//   - If Redis cannot be reached (core.ErrUnavailable) the task fails and asynq retries it as it
//     retries any failure. If Redis refuses the lock for a configuration reason
//     (core.ErrMisconfigured: wrong credentials, a missing ACL grant, a disabled command), the
//     error also wraps asynq.SkipRetry: asynq archives the task at once, with the error naming
//     what Redis refused, instead of spending its retries on a refusal that only an operator can
//     fix; the handler did not run, and the archived task can be run again once the
//     configuration is fixed (asynq's Inspector.RunTask, or asynqmon).
//   - One holder per key by default. WithLimit(n) (or WithLimitFunc, per task) lets up to n tasks
//     of a key run at once: each takes one of n permits of a core semaphore (core.Permits) instead
//     of the lock, with the same TTL, renewal, lost-permit signal and busy-task rules.
//
// What the task's error does not report (a release that failed: the lock then expires after its
// TTL) is logged to WithLogger's logger, slog.Default() by default.
//
// Inside the handler, core.FromContext(ctx) gives the lock, and its Fence the fencing token to pass
// to the resources the task writes to.
package asynqlock
