package core

import (
	"context"
	"time"
)

// Hook observes locks, in the style of net/http/httptrace: every field is optional. Instrumentation
// (see package otel) installs one with WithHook. Calls are synchronous and must be quick.
//
// The context flows through the hook: WaitStart and Acquired return the context used from then on,
// so a span started there becomes the parent of the Redis commands of the wait and of the work done
// under the lock (Lock.Context derives from the context Acquired returns).
type Hook struct {
	// WaitStart is called when Acquire, TryAcquire or Do starts. It returns the context for the rest
	// of the call (nil keeps ctx). Set: Name, Key, TTL.
	WaitStart func(ctx context.Context, info HookInfo) context.Context
	// Attempt is called after every acquire round trip. Set: Name, Key, Attempts, Woken (the attempt
	// followed a release message), Acquired, RetryAfter, Err.
	Attempt func(ctx context.Context, info HookInfo)
	// WaitDone is called once per call with the outcome. Set: Name, Key, Attempts, Duration (time
	// spent), Outcome, Err.
	WaitDone func(ctx context.Context, info HookInfo)
	// Acquired is called on success, after WaitDone, with WaitStart's context. It returns the parent
	// context of the lock's context (nil keeps ctx). Set: Name, Key, TTL, Fence, Holds, Reentrant.
	Acquired func(ctx context.Context, info HookInfo) context.Context
	// Renewed is called after every renewal attempt of a held lock, with the lock's context. Set:
	// Name, Key, TTL, Start (when it was sent), Duration (latency), Acquired (true: renewed), Err.
	Renewed func(lockCtx context.Context, info HookInfo)
	// Lost is called when a held lock is lost, with the lock's context (not yet cancelled). Set: Name,
	// Key, Fence, Duration (time held), Err (a *LostError).
	Lost func(lockCtx context.Context, info HookInfo)
	// Released is called after Release removed this hold, with the lock's context. Set: Name, Key,
	// Fence, Holds (left for this owner), Duration (time held), Err (if the release failed).
	Released func(lockCtx context.Context, info HookInfo)
}

// HookInfo describes a lock event. Which fields are set depends on the event; see Hook.
type HookInfo struct {
	Name       string        // lock name
	Key        string        // Redis key of the lock (may hold user data: record it only if allowed)
	TTL        time.Duration // requested or renewed TTL
	Fence      int64         // fencing token of the hold
	Holds      int64         // owner's hold count (after acquiring; left after releasing)
	Reentrant  bool          // the acquisition re-entered a lock the owner held
	Attempts   int           // acquire round trips so far
	Woken      bool          // the attempt followed a release message
	Acquired   bool          // the attempt or renewal succeeded
	Outcome    string        // see Outcome
	RetryAfter time.Duration // holder's remaining TTL after a failed attempt
	Start      time.Time     // when a renewal was sent
	Duration   time.Duration // wait time, hold time or renewal latency, by event
	Err        error         // the event's error, if any
}

// chainHooks folds several hooks into one; the context flows from each to the next.
func chainHooks(hs []Hook) *Hook {
	switch len(hs) {
	case 0:
		return nil
	case 1:
		h := hs[0]
		return &h
	}
	var out Hook
	out.WaitStart = func(ctx context.Context, in HookInfo) context.Context {
		for _, h := range hs {
			if h.WaitStart != nil {
				if c := h.WaitStart(ctx, in); c != nil {
					ctx = c
				}
			}
		}
		return ctx
	}
	out.Acquired = func(ctx context.Context, in HookInfo) context.Context {
		for _, h := range hs {
			if h.Acquired != nil {
				if c := h.Acquired(ctx, in); c != nil {
					ctx = c
				}
			}
		}
		return ctx
	}
	each := func(pick func(Hook) func(context.Context, HookInfo)) func(context.Context, HookInfo) {
		return func(ctx context.Context, in HookInfo) {
			for _, h := range hs {
				if f := pick(h); f != nil {
					f(ctx, in)
				}
			}
		}
	}
	out.Attempt = each(func(h Hook) func(context.Context, HookInfo) { return h.Attempt })
	out.WaitDone = each(func(h Hook) func(context.Context, HookInfo) { return h.WaitDone })
	out.Renewed = each(func(h Hook) func(context.Context, HookInfo) { return h.Renewed })
	out.Lost = each(func(h Hook) func(context.Context, HookInfo) { return h.Lost })
	out.Released = each(func(h Hook) func(context.Context, HookInfo) { return h.Released })
	return &out
}
