package asynqlock

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/hibiken/asynq"
)

// ErrKeyBusy means another task holds the task's key. The error returned by the middleware is a
// *KeyBusyError, which matches it with errors.Is.
var ErrKeyBusy = errors.New("lockkit: asynqlock: task key busy")

// KeyBusyError is returned when a task's key is held by another task. It matches ErrKeyBusy, and
// also core.ErrNotAcquired (and the context's error if the task's context ended while it waited).
type KeyBusyError struct {
	// Key is the task's key as KeyFunc returned it.
	Key string
	// RetryAfter is the holder's remaining TTL, a suggested delay before retrying: the key is free by
	// then at the latest, unless the holder is still running and renewing it. Zero when unknown.
	RetryAfter time.Duration

	err error
}

// Error describes the condition. It leaves out the key, which may hold user data and which asynq
// stores as the task's last error.
func (e *KeyBusyError) Error() string {
	return "lockkit: asynqlock: task key busy, retry after " + e.RetryAfter.String()
}

// ErrorType returns "key_busy", a stable label for logs, metrics and traces.
func (e *KeyBusyError) ErrorType() string { return "key_busy" }

// Is reports whether target is ErrKeyBusy.
func (e *KeyBusyError) Is(target error) bool { return target == ErrKeyBusy }

// Unwrap returns the lock error (a *core.NotAcquiredError, possibly joined with the context's error).
func (e *KeyBusyError) Unwrap() error { return e.err }

// IsFailure wraps a server's Config.IsFailure (nil means asynq's default: every error is a failure)
// so that ErrKeyBusy is not a failure. asynq then retries a busy task without incrementing its
// retry count, so waiting for a key never uses up MaxRetry, and leaves it out of the queue's
// processed and failed statistics.
//
// asynq checks the retry count before it asks IsFailure: a task whose count is already at its
// MaxRetry is archived on any error. The middleware therefore never returns ErrKeyBusy on such a
// last attempt; it waits for the key instead.
func IsFailure(next func(error) bool) func(error) bool {
	return func(err error) bool {
		if errors.Is(err, ErrKeyBusy) {
			return false
		}
		if next == nil {
			return err != nil
		}
		return next(err)
	}
}

// Bounds of the retry delay of a busy task.
const (
	minBusyDelay = 50 * time.Millisecond
	busyJitter   = 5 // up to 1/busyJitter of the delay is added at random
)

// RetryDelayFunc wraps a server's Config.RetryDelayFunc (nil means asynq.DefaultRetryDelayFunc) so
// that a busy task is retried after its KeyBusyError.RetryAfter (at least 50ms) plus up to 20% of
// random jitter, instead of asynq's back-off for failures.
//
// asynq stores retry times in whole seconds and moves due tasks back to their queue every
// Config.DelayedTaskCheckInterval (default 5s), so the real delay is rounded to those.
func RetryDelayFunc(next asynq.RetryDelayFunc) asynq.RetryDelayFunc {
	if next == nil {
		next = asynq.DefaultRetryDelayFunc
	}
	return func(n int, err error, t *asynq.Task) time.Duration {
		if !errors.Is(err, ErrKeyBusy) {
			return next(n, err, t)
		}
		d := minBusyDelay
		var kb *KeyBusyError
		if errors.As(err, &kb) {
			d = max(d, kb.RetryAfter)
		}
		return d + rand.N(d/busyJitter+1)
	}
}
