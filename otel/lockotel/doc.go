// Package lockotel traces and measures lockkit locks with OpenTelemetry: spans for lock waits, holds
// and renewals, and metrics for wait and hold durations, acquisitions, renewals and losses.
//
// Its name needs no alias beside go.opentelemetry.io/otel:
//
//	import "github.com/lockkit/lockkit/otel/lockotel"
//
// Install it on a client with one option:
//
//	c, err := core.New(rdb, core.WithHook(lockotel.Hook()))
//
// Hook uses the global TracerProvider and MeterProvider unless WithTracerProvider and
// WithMeterProvider name others. Every lock of the client is then traced, including those taken
// by the lockkit middleware and job adapters, which go through the same client.
//
// The package belongs to the module github.com/lockkit/lockkit/otel (go get
// github.com/lockkit/lockkit/otel/lockotel), so the OpenTelemetry API enters the module graph of
// programs that use it and of no others. Until v0.2.0 it was package
// github.com/lockkit/lockkit/otel; that path now forwards here and is deprecated.
//
// # Spans
//
// All spans are INTERNAL and belong to the instrumentation scope ScopeName.
//
//	request span (the caller's)
//	├── lock.wait    from the Acquire / TryAcquire / Do call to its outcome
//	│                (the Redis commands of the attempts nest here)
//	└── lock.hold    from acquisition to release or loss; linked to its lock.wait
//	    ├── lock.renew   one per watchdog renewal (timed as sent and answered)
//	    └── ...          the work done with the lock's context, and its Redis commands
//
// lock.hold is a child of the caller's span, not of lock.wait, and Lock.Context carries it, so the
// spans of the work (and those redisotel makes for its Redis commands) nest under the hold. Start
// a span for the unit of work before taking the lock: without one, lock.wait and lock.hold each
// begin a trace of their own (still linked).
//
// lock.wait has an event "lock.attempt" per attempt (lockkit.lock.attempt, lockkit.lock.woken:
// the attempt followed a release message, lockkit.lock.acquired, lockkit.lock.retry_after in
// seconds); an attempt that acquires at once records no event, and lockkit.lock.attempts is only
// recorded when it is not 1. Its lockkit.lock.outcome is
// acquired, contended (TryAcquire found the lock taken), timeout, cancelled, guarded or error (see
// core.WaitInfo.Outcome). Only "error" (Redis unavailable, client closed) sets the span's status to Error:
// not getting a lock is an outcome, not a failure.
//
// lock.hold records lockkit.lock.fence, and on a re-entered lock lockkit.lock.reentrant=true and
// lockkit.lock.holds (the hold count after this acquisition; both are left out on a fresh hold, to
// spare the SDK's time) and, when it ends, lockkit.lock.hold.outcome: released, lost (status
// Error, with lockkit.lock.lost.reason "not_owner" or "expired"), or error (the release could not
// reach Redis; status Error). A re-entered lock has a lock.hold per Acquire, nested.
//
// A permit of a semaphore (core.Permits) is traced as a lock: lock.wait, lock.hold and lock.renew
// carry lockkit.lock.permits, the semaphore's limit (left out for locks). So is a hold of a
// read-write lock (core.Read, core.Write): its spans carry lockkit.lock.mode, "read" or "write"; a
// nested hold (a read inside a write) has its own lock.hold, with its own mode.
//
// lock.renew is timed as the renewal was sent and answered; a lock is renewed once for all its
// holds, and the renewal is recorded under the outermost hold still open. A renewal that fails has
// status Error and lockkit.lock.renew.outcome "error" (Redis unreachable) or "not_owner" (the lock
// is gone; lock.hold ends as lost right after). WithRenewalEvents records renewals as "lock.renew"
// events on lock.hold instead of spans, for holds that last hours.
//
// Every lockkit span records lockkit.lock.name; lock.hold and lock.renew lockkit.lock.ttl
// (seconds) too. The Redis key (lockkit.lock.key) only with WithKeyAttribute, as names may carry
// user data. Owner tokens are never recorded: whoever knows one can release the lock. Failures
// carry error.type, the error's ErrorType ("unavailable", "lost", ...).
//
// # Metrics
//
//	lockkit.lock.wait.duration   histogram, s      acquire calls by lockkit.lock.outcome
//	lockkit.lock.hold.duration   histogram, s      holds by lockkit.lock.hold.outcome
//	lockkit.lock.acquisitions    counter           acquire calls by lockkit.lock.outcome
//	lockkit.lock.renewals        counter           renewals by lockkit.lock.renew.outcome
//	                                               (renewed, not_owner, error)
//	lockkit.lock.lost            counter           locks lost, by lockkit.lock.lost.reason
//	lockkit.lock.held            up-down counter   locks held now (a re-entered lock counts once)
//
// Histograms use explicit buckets from 0.5 ms to 300 s. Metrics carry no key and, by default, no
// lock name: names often embed IDs, and every distinct value would be a new time series.
// WithNameOnMetrics adds lockkit.lock.name, mapped to a bounded set of values by a function of
// yours.
//
// An instrument that cannot be created is reported to otel.Handle and replaced by a no-op: the
// instrumentation never makes a lock fail.
//
// # Cost
//
// Without a hook, core allocates nothing for instrumentation. With no-op providers the hook costs a
// few hundred nanoseconds and three allocations per lock; with the SDK the cost is that of two
// sampled spans and a handful of measurements (see BenchmarkLockUnlock).
package lockotel
