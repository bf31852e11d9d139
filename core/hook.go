package core

import (
	"context"
	"time"
)

// Hook observes locks, in the style of net/http/httptrace: every field is optional. Instrumentation
// (see package github.com/lockkit/lockkit/otel/lockotel) installs one with WithHook. Calls are
// synchronous and must be quick.
//
// An acquire call is reported by WaitStart, Attempt (once per round trip) and WaitDone, with a
// WaitInfo; a hold by Acquired, Renewed, and then exactly one Lost or Released, with a HoldInfo
// whose Lock identifies the hold. WaitStart and Acquired return the context used from then on, so
// a span started there is the parent of the wait's Redis commands and of the work under the lock.
type Hook struct {
	// WaitStart is called when Acquire, TryAcquire or Do starts. It returns the context for the rest
	// of the call (nil keeps ctx).
	WaitStart func(ctx context.Context, w WaitInfo) context.Context
	// Attempt is called after every acquire round trip.
	Attempt func(ctx context.Context, w WaitInfo)
	// WaitDone is called once per call with its outcome.
	WaitDone func(ctx context.Context, w WaitInfo)
	// Acquired is called on success, after WaitDone, with WaitStart's context. It returns the parent
	// context of the lock's context (nil keeps ctx). HoldInfo.Lock's Context is not set yet.
	Acquired func(ctx context.Context, h HoldInfo) context.Context
	// Renewed is called after every renewal attempt of a held lock, once for the outermost hold
	// this Client still has of it (re-entered holds are renewed together), with its context.
	Renewed func(lockCtx context.Context, h HoldInfo)
	// Lost is called when a held lock is lost, for each of this Client's holds of it, with the
	// hold's context, already cancelled, and before this Client gives anything back in Redis:
	// while Lost runs, nobody can take the lock through this Client (only through Redis forgetting
	// it: expiry, a failover, a deleted key). The exception is a lock found gone by a release
	// (Redis answered "not held"): the Client's other holds of it are reported Lost after that
	// reply. Last is set on exactly one of the holds: count losses there.
	Lost func(lockCtx context.Context, h HoldInfo)
	// Released is called when Release or Close ended a hold, with the hold's context (cancelled
	// before the release was sent), after Redis answered (Err matches ErrNotHeld if the lock was
	// gone already): another client may hold the lock by then.
	Released func(lockCtx context.Context, h HoldInfo)
}

// WaitInfo describes an acquire call. Which fields are set depends on the event.
type WaitInfo struct {
	// Name is the lock name and Key its Redis key (may hold user data: record it only if allowed).
	// For a set (AcquireAll), the first name's.
	Name, Key string
	// Names are the names of a set (AcquireAll), nil for one lock (may hold user data).
	Names []string
	// TTL is the requested TTL.
	TTL time.Duration
	// Limit is the semaphore's number of permits when the call takes a permit (Permits), else 0.
	Limit int
	// Mode is "read" or "write" when the call takes a side of a read-write lock, else "".
	Mode string
	// Attempts is the number of acquire round trips so far (Attempt, WaitDone).
	Attempts int
	// Woken reports that the attempt followed a release message (Attempt).
	Woken bool
	// Acquired reports that the attempt succeeded (Attempt).
	Acquired bool
	// RetryAfter is the holder's remaining TTL after a failed attempt (Attempt).
	RetryAfter time.Duration
	// Outcome classifies the call's result (WaitDone): "acquired"; "contended" (TryAcquire found
	// the lock taken); "timeout" (the WithWait limit or the context's deadline passed); "cancelled"
	// (the context was cancelled); "guarded" (the WithGuard key exists); or "error".
	Outcome string
	// Duration is the time the call spent (WaitDone).
	Duration time.Duration
	// Err is the attempt's or the call's error, if any (Attempt, WaitDone).
	Err error
}

// HoldInfo describes a hold, a Lock from its acquisition to its end; its fields depend on the event.
type HoldInfo struct {
	// Lock is the hold; it identifies the hold across events and gives its Name, Key, Fence, Holds.
	Lock *Lock
	// TTL is the hold's TTL (Acquired), or the TTL a renewal asked for (Renewed).
	TTL time.Duration
	// Held is the change this event makes to the number of locks this Client holds: +1 on the
	// acquisition that made the Client hold the lock (not a re-entry), minus as many on the event
	// that ends its last hold of it (Released, Lost), else 0. Summed over events it never drifts.
	Held int
	// Last is set on the event that ends this Client's last hold of the lock (Released, Lost).
	Last bool
	// Holds is the owner's hold count left in Redis after a release (Released).
	Holds int64
	// Start is when a renewal was sent (Renewed).
	Start time.Time
	// Duration is the renewal's latency (Renewed), or how long the hold lasted (Lost, Released).
	Duration time.Duration
	// Renewed reports that the renewal succeeded (Renewed).
	Renewed bool
	// Err is the event's error: a renewal's, the *LostError of a loss, a failed release's.
	Err error
}

// chainHooks folds several hooks into one; the context flows from each to the next.
func chainHooks(hs []Hook) Hook {
	switch len(hs) {
	case 0:
		return Hook{}
	case 1:
		return hs[0]
	}
	return Hook{
		WaitStart: chain(hs, func(h Hook) func(context.Context, WaitInfo) context.Context { return h.WaitStart }),
		Acquired:  chain(hs, func(h Hook) func(context.Context, HoldInfo) context.Context { return h.Acquired }),
		Attempt:   each(hs, func(h Hook) func(context.Context, WaitInfo) { return h.Attempt }),
		WaitDone:  each(hs, func(h Hook) func(context.Context, WaitInfo) { return h.WaitDone }),
		Renewed:   each(hs, func(h Hook) func(context.Context, HoldInfo) { return h.Renewed }),
		Lost:      each(hs, func(h Hook) func(context.Context, HoldInfo) { return h.Lost }),
		Released:  each(hs, func(h Hook) func(context.Context, HoldInfo) { return h.Released }),
	}
}

// each calls the picked callback of every hook that has it.
func each[I any](hs []Hook, pick func(Hook) func(context.Context, I)) func(context.Context, I) {
	return func(ctx context.Context, in I) {
		for _, h := range hs {
			if f := pick(h); f != nil {
				f(ctx, in)
			}
		}
	}
}

// chain calls the picked callback of every hook that has it, each with the context the one before
// returned (hooked).
func chain[I any](hs []Hook, pick func(Hook) func(context.Context, I) context.Context) func(context.Context, I) context.Context {
	return func(ctx context.Context, in I) context.Context {
		for _, h := range hs {
			ctx = hooked(ctx, pick(h), in)
		}
		return ctx
	}
}

// hooked runs f, a hook's WaitStart or Acquired (nil: none), and returns the context it returned,
// or ctx if it returned nil.
func hooked[I any](ctx context.Context, f func(context.Context, I) context.Context, in I) context.Context {
	if f != nil {
		if x := f(ctx, in); x != nil {
			return x
		}
	}
	return ctx
}
