package core

import (
	"context"
	"errors"

	"github.com/lockkit/lockkit/core/internal/store"
)

// Read makes Acquire, TryAcquire and Do take the shared (read) side of the read-write lock named
// name: any number of readers hold it together, never with a writer (Write). One name, one lock:
// a write and a lock (taken without Read, Write or Permits) are the same exclusive side of the
// name, and reads share the name with reads only, never with a lock or permits (Permits) of the
// same name (see docs/guarantees.md, "One name, one lock").
//
// A read or write hold is a *Lock with everything a lock has: its own owner token and lease,
// renewal by the Client's watchdog, a Context cancelled (with cause) on Release or loss — before
// the lock can pass to a writer (or, for a writer, to anyone) — a Fence, Extend, TTL,
// WithMaxHold and hooks.
//
// Order: readers and writers are served first come, first served, across processes (every waiter
// queues in Redis): an acquisition is granted only when no live waiter is queued ahead of it, so a
// writer waits only for the holders and waiters ahead of it, and readers that come after a waiting
// writer wait behind it (a stream of readers cannot starve a writer; a writer cannot starve the
// readers behind it). A release hands the lock on directly: to the writer at the head of the
// queue, or to all the readers at the head up to the next writer, without another round trip. A
// TryAcquire never jumps the queue either: with a waiter ahead it is refused. Fair is implied.
//
// Fences: one sequence per name for every kind of hold, strictly increasing in the order the holds
// were granted. A writer's fence is above the fence of every hold granted before it, and
// every hold granted after the writer has a fence above the writer's. So a resource that records
// the highest fence it accepted from a writer (W) and from anyone (A) refuses a write whose fence
// is below A (a stale writer: someone was granted the lock after it), and a read whose fence is
// below W (a reader that outlived a writer's turn). See docs/guarantees.md.
//
// Re-entry: an acquisition through the context of a hold of this Client on the same read-write
// lock (the hold's Context, or one derived from it) is nested in that hold when the outer hold is
// a write (Read or Write inside it), or when both are reads. A nested hold sends nothing to Redis:
// it shares the outer hold's acquisition (its token, lease and Fence), reports Holds() > 1, and ends
// no later than the outer hold (the outer hold's end, whatever its cause, ends it first, with the
// same cause); its own Release only ends it. Upgrade is refused: Write through the context of a
// read hold fails with ErrInvalid (two readers upgrading at once would each wait for the other
// for ever); release the read and take the write. Downgrade: a read nested in a write holds the
// lock exclusively until the write ends; there is no atomic hand-over from a write to a read (a
// writer queued meanwhile goes first once the write is released). WithOwner, WithToken and WithGuard are
// refused with ErrInvalid, and so is Read or Write with Permits, or both together.
//
// Read-write locks work on a plain, Sentinel or Cluster client (every key of one name has the
// {name} hash tag). Over Redlock (NewRedlock) the call fails with ErrInvalid: keeping a writer
// apart would hold there as a lock's exclusion does (any two majorities share a node, and a node
// grants a writer only while it has no holder), but the order that keeps writers from starving
// would not: it needs one queue, and each node would keep its own, in orders that disagree (two
// waiters, each first on a different majority, would wait for each other).
func Read() AcquireOption { return func(o *acquireOptions) { o.rw |= rwRead } }

// Write makes Acquire, TryAcquire and Do take the exclusive (write) side of the read-write lock
// named name: one writer, and no reader, at a time. See Read for the order, the fences, re-entry
// and the topologies.
func Write() AcquireOption { return func(o *acquireOptions) { o.rw |= rwWrite } }

// Mode returns "read" or "write" for a hold of a read-write lock (Read, Write), and "" for a lock
// or a permit.
func (l *Lock) Mode() string {
	if l == nil || !l.kind.rw() {
		return ""
	}
	return l.kind.String()
}

// initRW prepares l to take the read or write side of the read-write lock name (Read, Write):
// checks the options, and finds the hold of this Client that ctx carries on it, if any (re-entry).
func (c *Client) initRW(ctx context.Context, l *Lock, ao *acquireOptions, name string) error {
	mode := ao.rw
	switch {
	case mode == rwRead|rwWrite:
		return invalid("Read and Write cannot be combined")
	case ao.permits != 0:
		return invalid("Permits cannot be combined with Read or Write")
	case ao.owner != "" || ao.token != "" || ao.guard != "":
		return invalid("WithOwner, WithToken and WithGuard cannot be used with Read or Write (a read-write lock is re-entered through a hold's context only)")
	}
	if !c.st.Caps().Permits {
		return invalid("read-write locks (Read, Write) are not supported over Redlock: a quorum of nodes does not keep a writer apart from readers")
	}
	limit := MaxPermits // readers share, up to the semaphore bound
	if mode == rwWrite {
		limit = 1
	}
	l.kind = kindOfOptions(ao)
	l.fair = true
	tag := c.opt.prefix + "{" + name + "}"
	if o := rwHeldIn(ctx, c, tag+store.RWSuffix); o != nil {
		if o.kind == kindRead && mode == rwWrite {
			return invalid("Write through the context of a read hold of %q (upgrade) is not supported: two readers upgrading at once would wait for each other for ever; release the read hold, then take Write", name)
		}
		l.k.InitRW(tag, name, o.k.Sem.Limit)
		l.outer, l.isNested = o, true
		l.token, l.tok, l.hold = o.token, o.tok, o.hold
		return nil
	}
	l.k.InitRW(tag, name, limit)
	l.token = store.NewToken()
	l.tok, l.hold = l.token, any("0")
	l.req = &store.AcquireReq{Token: l.tok, Hold: l.hold, TTL: l.ttl, Limit: limit, Fair: true}
	return nil
}

// rwHeldIn returns the read or write hold of key by c that ctx carries, if any: the innermost hold
// in ctx, or one whose context the context of a hold in ctx was derived from (a read-write hold
// stays found through the locks taken inside it).
func rwHeldIn(ctx context.Context, c *Client, key string) *Lock {
	l, _ := ctx.Value(heldKey{}).(*Lock)
	for l != nil {
		if l.c == c && l.kind.rw() && l.k.Main == key {
			return l
		}
		l.mu.Lock()
		parent := l.vctx.Context
		l.mu.Unlock()
		if parent == nil {
			return nil
		}
		l, _ = parent.Value(heldKey{}).(*Lock)
	}
	return nil
}

// notNested is the error of a nested hold whose outer hold ended before it could be added.
func (l *Lock) notNested() error {
	return errors.Join(ErrNotHeld, l.outer.lostCause())
}
