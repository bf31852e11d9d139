package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// sentinelError is the type of the package's sentinel errors. Match them with errors.Is; the
// ErrorType method gives a short, stable label for logs, metrics and traces. The typed errors
// (*NotAcquiredError, *LostError, ...) wrap their sentinel: errors.As(err, &t) with t an
// interface{ ErrorType() string } finds the label of any error of this package.
type sentinelError struct {
	msg string
	typ string
}

// Error returns the message, prefixed "lockkit: ".
func (e *sentinelError) Error() string { return e.msg }

// ErrorType returns a short stable label such as "not_acquired" or "lost".
func (e *sentinelError) ErrorType() string { return e.typ }

// Sentinel errors. Errors returned by this package match one of them with errors.Is, except errors
// of the context (which are joined in where the context ended a wait) and errors of fn in Do.
var (
	// ErrNotAcquired means the lock is held by another owner: a try failed, or a wait ran out of its
	// WithWait limit or its context. The error is a *NotAcquiredError carrying the holder's remaining TTL.
	ErrNotAcquired error = &sentinelError{"lockkit: lock not acquired", "not_acquired"}
	// ErrLost means a lock was taken away while held: it expired before it could be renewed, or Redis
	// said it belongs to someone else. A lock's context is cancelled with a *LostError cause.
	ErrLost error = &sentinelError{"lockkit: lock lost", "lost"}
	// ErrNotHeld means the caller does not hold the lock (any more): Release, Extend or TTL after the
	// lock was lost or expired, or on a nil *Lock. Nothing in Redis was changed.
	ErrNotHeld error = &sentinelError{"lockkit: lock not held", "not_held"}
	// ErrReleased is the cause of a lock's context after Release.
	ErrReleased error = &sentinelError{"lockkit: lock released", "released"}
	// ErrClosed means the Client was closed.
	ErrClosed error = &sentinelError{"lockkit: client closed", "closed"}
	// ErrInvalid means an argument was rejected before anything was sent to Redis.
	ErrInvalid error = &sentinelError{"lockkit: invalid argument", "invalid_argument"}
	// ErrGuarded means the guard key of WithGuard exists: the work the lock protects was done
	// already. The error is a *GuardedError carrying the key's value.
	ErrGuarded error = &sentinelError{"lockkit: guard key exists", "guarded"}
	// ErrUnavailable means Redis could not be reached or answered with an error. The underlying
	// error is wrapped too.
	ErrUnavailable error = &sentinelError{"lockkit: redis unavailable", "unavailable"}
	// ErrMisconfigured means Redis refused a command for a reason no retry can change: the
	// credentials (WRONGPASS, NOAUTH), a grant the ACL user lacks (NOPERM, also for a command a
	// script runs), or a command unknown to the server or renamed away. It does not match
	// ErrUnavailable: fix the configuration rather than retry. The error is a *MisconfiguredError
	// carrying the server's message, or a *QuorumError when such refusals alone leave no quorum.
	ErrMisconfigured error = &sentinelError{"lockkit: redis misconfigured", "misconfigured"}
	// ErrMaxHold means a hold reached its WithMaxHold limit and was ended by lockkit: its context
	// is cancelled with a *MaxHoldError cause and the hold released, while renewals still worked.
	// It is not a loss: nobody else held the lock while this hold's context was live.
	ErrMaxHold error = &sentinelError{"lockkit: maximum hold reached", "max_hold"}
)

// NotAcquiredError is returned when the lock is held by someone else. It matches ErrNotAcquired.
type NotAcquiredError struct {
	// Name is the lock name.
	Name string
	// RetryAfter is the holder's remaining TTL as Redis reported it at the last attempt: a sensible
	// delay before trying again. Zero when unknown.
	RetryAfter time.Duration
	// Attempts is the number of acquire attempts made.
	Attempts int
	// Waited is how long the call waited; zero for TryAcquire.
	Waited time.Duration
}

// Error describes the failure.
func (e *NotAcquiredError) Error() string {
	return fmt.Sprintf("lockkit: lock %q not acquired after %d attempt(s) (held for %v more)", e.Name, e.Attempts, e.RetryAfter)
}

// Unwrap returns ErrNotAcquired, which gives the error its ErrorType.
func (e *NotAcquiredError) Unwrap() error { return ErrNotAcquired }

// GuardedError is returned when the guard key of WithGuard exists. It matches ErrGuarded.
type GuardedError struct {
	// Name is the lock name and Key the guard key.
	Name, Key string
	// Value is the guard key's value.
	Value string
}

// Error describes the condition.
func (e *GuardedError) Error() string {
	return fmt.Sprintf("lockkit: lock %q not taken: guard key exists", e.Name)
}

// Unwrap returns ErrGuarded, which gives the error its ErrorType.
func (e *GuardedError) Unwrap() error { return ErrGuarded }

// LostError is the cause of a lost lock's context and is returned by Do when the lock was lost while
// fn ran. It matches ErrLost.
type LostError struct {
	// Name is the lock name.
	Name string
	// Reason is "not_owner" when Redis said the lock belongs to someone else (or to nobody), or
	// "expired" when it could not be renewed before its local validity deadline.
	Reason string
	// Err is the last renewal error, if any.
	Err error
}

// Error describes the loss.
func (e *LostError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("lockkit: lock %q lost (%s): %v", e.Name, e.Reason, e.Err)
	}
	return fmt.Sprintf("lockkit: lock %q lost (%s)", e.Name, e.Reason)
}

// Unwrap returns ErrLost, which gives the error its ErrorType, and the last renewal error.
func (e *LostError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrLost}
	}
	return []error{ErrLost, e.Err}
}

// MaxHoldError is the cause of the context of a hold that reached its WithMaxHold limit, and is
// returned by Do (joined with fn's error), Release and Extend afterwards. It matches ErrMaxHold.
type MaxHoldError struct {
	// Name is the lock name.
	Name string
	// Limit is the maximum hold that was reached.
	Limit time.Duration
}

// Error describes the condition.
func (e *MaxHoldError) Error() string {
	return fmt.Sprintf("lockkit: lock %q: maximum hold of %v reached", e.Name, e.Limit)
}

// Unwrap returns ErrMaxHold, which gives the error its ErrorType.
func (e *MaxHoldError) Unwrap() error { return ErrMaxHold }

// MisconfiguredError is returned when Redis refused a command for a configuration reason (see
// ErrMisconfigured, which it matches, besides the server's error).
type MisconfiguredError struct {
	// Op is lockkit's operation ("acquire", "release", ...).
	Op string
	// Reason is "credentials" (WRONGPASS, NOAUTH), "permission" (NOPERM: the ACL user lacks a
	// grant) or "command" (the server does not know the command, or it was renamed away).
	Reason string
	// Err is the server's error; its message names the refused command or grant.
	Err error
}

// Error says what Redis refused and why, with the server's message (without the arguments an
// unknown command's message repeats: they hold the owner token).
func (e *MisconfiguredError) Error() string {
	msg, _, _ := strings.Cut(e.Err.Error(), ", with args beginning with")
	return "lockkit: redis refused " + e.Op + " (" + e.Reason + "): " + msg
}

// Unwrap returns ErrMisconfigured, which gives the error its ErrorType, and the server's error.
func (e *MisconfiguredError) Unwrap() []error { return []error{ErrMisconfigured, e.Err} }

// redisError wraps an error from Redis; it matches ErrUnavailable and the wrapped error.
type redisError struct {
	op  string
	err error
}

func (e *redisError) Error() string        { return "lockkit: redis " + e.op + ": " + e.err.Error() }
func (e *redisError) Unwrap() error        { return e.err }
func (e *redisError) Is(target error) bool { return target == ErrUnavailable }

// unavailable wraps err, an error of the store: a *MisconfiguredError when Redis refused the
// command for a configuration reason, else a *redisError (ErrUnavailable).
func unavailable(op string, err error) error {
	err = fromStore(err)
	if errors.Is(err, ErrMisconfigured) {
		return err // a *QuorumError of refusals, which names the operation
	}
	if why := store.Refused(err); why != "" {
		return &MisconfiguredError{Op: op, Reason: why, Err: err}
	}
	return &redisError{op: op, err: err}
}

// ErrorType is that of the first error in the wrapped chain that has one, else "unavailable".
func (e *redisError) ErrorType() string {
	var t interface{ ErrorType() string }
	if errors.As(e.err, &t) {
		return t.ErrorType()
	}
	return "unavailable"
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// outcome classifies the result of an acquire call as WaitInfo.Outcome says.
func outcome(err error) string {
	switch na, ok := errors.AsType[*NotAcquiredError](err); {
	case err == nil:
		return "acquired"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, ErrGuarded):
		return "guarded"
	case ok && na.Waited > 0:
		return "timeout"
	case ok:
		return "contended"
	default:
		return "error"
	}
}

// QuorumError reports a Redlock operation that did not reach a quorum because nodes failed. It
// matches ErrUnavailable, or ErrMisconfigured when the nodes that refused the command for a
// configuration reason (Refused) leave too few to reach a quorum even if every other node answered.
type QuorumError struct {
	// Op is the operation ("acquire", "release", "renew", ...).
	Op string
	// Nodes is the number of nodes, Quorum how many must agree, OK how many did, Refused how many
	// refused the command for a configuration reason (see ErrMisconfigured).
	Nodes, Quorum, OK, Refused int
	// Errs holds, per failed node, "address: error".
	Errs []string
}

// Error summarises the failure and why each failed node failed.
func (e *QuorumError) Error() string {
	return fmt.Sprintf("lockkit: redlock %s: %d of %d nodes succeeded, %d needed; failed: %s",
		e.Op, e.OK, e.Nodes, e.Quorum, strings.Join(e.Errs, "; "))
}

// Unwrap returns ErrMisconfigured when the refusals alone leave no quorum, else ErrUnavailable;
// either gives the error its ErrorType.
func (e *QuorumError) Unwrap() error {
	if e.Nodes-e.Refused < e.Quorum {
		return ErrMisconfigured
	}
	return ErrUnavailable
}

// fromStore translates the store's own errors into core's: a *store.QuorumError into a
// *QuorumError, store.ErrUnsupported into ErrInvalid; any other error is returned as it is.
func fromStore(err error) error {
	switch q, ok := errors.AsType[*store.QuorumError](err); {
	case ok:
		return (*QuorumError)(q) // (the same fields)
	case errors.Is(err, store.ErrUnsupported):
		return invalid("%v", err)
	}
	return err
}
