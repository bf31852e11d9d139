// Package adapter is the contract lockkit's adapters (httpmw, grpcmw, asynqlock, cronlock,
// gocronlock) share, in code, so that each of them keeps only its transport mapping:
//
//   - the option base (Options, KeyOptions): the fields every adapter has — TTL, wait, logger,
//     namespace, limit, key or keys — set by one setter each that records the option's name,
//     checked by one Validate with one wording, which also refuses an option given to a
//     constructor that would ignore it;
//   - one error shape, "lockkit: PKG: what is wrong", matching core.ErrInvalid (Invalid, Sentinel);
//   - one way to take what a unit of work needs (Options.Acquire): the lock of its key, one of the
//     key's permits (WithLimit), or the locks of all its keys at once (WithKeys, core.AcquireAll),
//     trying once or waiting as configured, in the adapter's namespace; and one way to end it
//     (Hold): lost-lock detection and a release that outlives the request;
//   - one logging rule: what the caller is not told goes to the given logger, or slog.Default().
//
// docs/adapters.md describes the conventions it serves.
package adapter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockkit/lockkit/core"
)

// Invalid returns the error of an invalid argument or option of package pkg. Its text is
// "lockkit: PKG: MESSAGE" ("lockkit" once), and it matches core.ErrInvalid and Sentinel(pkg) with
// errors.Is. Adapters return it from their constructors, or panic with it where the ecosystem's
// constructor shape has no error result (see docs/adapters.md).
func Invalid(pkg, format string, args ...any) error {
	return &invalidError{pkg: pkg, msg: fmt.Sprintf(format, args...)}
}

type invalidError struct{ pkg, msg string }

func (e *invalidError) Error() string { return "lockkit: " + e.pkg + ": " + e.msg }

// Unwrap returns core.ErrInvalid.
func (e *invalidError) Unwrap() error { return core.ErrInvalid }

// Is reports whether target is the sentinel of the error's package.
func (e *invalidError) Is(target error) bool {
	s, ok := target.(*sentinel)
	return ok && s.pkg == e.pkg
}

// Sentinel returns the ErrInvalid of package pkg, for the packages that export one (cronlock,
// gocronlock): its text is "lockkit: PKG: invalid argument", it matches core.ErrInvalid, and every
// Invalid(pkg, ...) error matches it. Each call returns a new value; a package keeps its own in a
// variable.
func Sentinel(pkg string) error { return &sentinel{pkg: pkg} }

type sentinel struct{ pkg string }

func (s *sentinel) Error() string { return "lockkit: " + s.pkg + ": invalid argument" }

// Unwrap returns core.ErrInvalid.
func (s *sentinel) Unwrap() error { return core.ErrInvalid }

// CheckTTL checks a lock TTL option against core's bounds.
func CheckTTL(pkg, option string, d time.Duration) error {
	if d < core.MinTTL || d > core.MaxTTL {
		return Invalid(pkg, "%s(%v) is outside [%v, %v]", option, d, core.MinTTL, core.MaxTTL)
	}
	return nil
}

// CheckWait checks a wait option.
func CheckWait(pkg string, d time.Duration) error {
	if d < 0 {
		return Invalid(pkg, "WithWait(%v) is negative", d)
	}
	return nil
}

// CheckNamespace checks a WithNamespace option: 1 to 64 of a-z, 0-9 and '-', the rule
// core.InNamespace enforces when a lock is taken. Checking it at construction turns a typo into a
// start-up error instead of a failure of every call.
func CheckNamespace(pkg, ns string) error {
	ok := ns != "" && len(ns) <= 64
	for i := 0; ok && i < len(ns); i++ {
		c := ns[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	if !ok {
		return Invalid(pkg, "WithNamespace(%q) must be 1 to 64 of a-z, 0-9 and '-'", ns)
	}
	return nil
}

// CheckLimit checks a WithLimit option (or a limit computed per call): 1 to core.MaxPermits.
func CheckLimit(pkg string, n int) error {
	if n < 1 || n > core.MaxPermits {
		return Invalid(pkg, "WithLimit(%d) is outside [1, %d]", n, core.MaxPermits)
	}
	return nil
}

// Acquire takes the lock name in namespace ns: one try when wait is 0, else a wait of at most wait
// (never past ctx). opts is not modified.
func Acquire(ctx context.Context, locks *core.Client, ns, name string, ttl, wait time.Duration, opts ...core.AcquireOption) (*core.Lock, error) {
	opts = append(opts[:len(opts):len(opts)], core.InNamespace(ns))
	if wait > 0 {
		return locks.Acquire(ctx, name, ttl, append(opts, core.WithWait(wait))...)
	}
	return locks.TryAcquire(ctx, name, ttl, opts...)
}

// Lost returns why a lock's context ended if the lock was taken away (a cause matching core.ErrLost)
// or its Client closed (core.ErrClosed) before it was released; nil while held, after a release,
// or when only the caller's own context ended.
func Lost(lockCtx context.Context) error {
	if cause := context.Cause(lockCtx); errors.Is(cause, core.ErrLost) || errors.Is(cause, core.ErrClosed) {
		return cause
	}
	return nil
}

// Release gives l back even if ctx has ended, bounded by timeout (the lock's TTL: after that the
// lock has expired anyway).
func Release(ctx context.Context, l *core.Lock, timeout time.Duration) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return l.Release(rctx)
}
