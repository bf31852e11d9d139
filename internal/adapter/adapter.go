// Package adapter is the glue lockkit's adapters (httpmw, grpcmw, asynqlock, cronlock) share, so
// that each of them keeps only its transport mapping: option checks with one wording, the
// try-or-wait switch, lost-lock detection and a release that outlives the request. docs/adapters.md
// describes the conventions it serves.
package adapter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockkit/lockkit/core"
)

// Invalid returns an error matching core.ErrInvalid, worded "lockkit: PKG: MESSAGE". Adapters
// return it from their constructors (or panic with it where the ecosystem's constructor shape has
// no error, see docs/adapters.md).
func Invalid(pkg, format string, args ...any) error {
	return fmt.Errorf("lockkit: %s: %s: %w", pkg, fmt.Sprintf(format, args...), core.ErrInvalid)
}

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

// Acquire takes the lock name in namespace ns: one try when wait is 0, else a wait of at most wait
// (never past ctx).
func Acquire(ctx context.Context, locks *core.Client, ns, name string, ttl, wait time.Duration, opts ...core.AcquireOption) (*core.Lock, error) {
	opts = append(opts, core.InNamespace(ns))
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
