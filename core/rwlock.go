package core

import (
	"context"

	"github.com/lockkit/lockkit/core/internal/store"
)

// Read makes Acquire, TryAcquire and Do take the shared (read) side of the read-write lock named
// name: any number of readers hold it together, never with a writer (Write). One name, one lock: a
// write and a lock (taken without Read, Write or Permits) are the same exclusive side of the name,
// and reads share the name with reads only, never with a lock or permits of the same name.
//
// A read or write hold is a *Lock with everything a lock has (its own token and lease, renewal, a
// Context cancelled before the lock can pass on, Fence, Extend, TTL, WithMaxHold, hooks). Readers
// and writers are served first come, first served across processes, and a release hands the lock
// on directly (Fair is implied; a TryAcquire never jumps the queue). Fences form one sequence per
// name: every hold granted before a writer has a lower fence, every hold after it a higher one.
//
// Through the context of a hold of this Client on the same name, a Read or Write inside a write,
// or a Read inside a read, is a nested hold: nothing is sent, it shares the outer acquisition and
// ends no later than it. Upgrade (Write inside a read) is refused with ErrInvalid, and so are
// WithOwner, WithToken, WithGuard, Permits, Read with Write, and Read or Write over Redlock
// (NewRedlock: the queue that keeps writers from starving needs one order, and each node would
// keep its own). docs/guarantees.md ("Read-write locks", "One name, one lock") gives the rules and
// the tests behind each.
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
	switch {
	case ao.rw == rwRead|rwWrite:
		return invalid("Read and Write cannot be combined")
	case ao.permits != 0:
		return invalid("Permits cannot be combined with Read or Write")
	case ao.owner != "" || ao.token != "" || ao.guard != "":
		return invalid("WithOwner, WithToken and WithGuard cannot be used with Read or Write (a read-write lock is re-entered through a hold's context only)")
	case !c.st.Caps().Permits:
		return invalid("read-write locks (Read, Write) are not supported over Redlock: a quorum of nodes does not keep a writer apart from readers")
	}

	limit := MaxPermits // readers share, up to the semaphore bound
	if l.kind == kindWrite {
		limit = 1
	}
	l.fair = true

	tag := c.opt.prefix + "{" + name + "}"
	key := tag + store.RWSuffix
	if o := holdIn(ctx, func(h *Lock) bool { return h.c == c && h.kind.rw() && h.k.Main == key }); o != nil {
		if o.kind == kindRead && l.kind == kindWrite {
			return invalid("Write through the context of a read hold of %q (upgrade) is not supported: two readers upgrading at once would wait for each other for ever; release the read hold, then take Write", name)
		}
		l.k.InitRW(tag, name, o.k.Sem.Limit)
		l.outer, l.nested = o, true
		l.token, l.holdID = o.token, o.holdID
		return nil
	}

	l.k.InitRW(tag, name, limit)
	l.token, l.holdID = store.NewToken(), any("0")
	l.req = &store.AcquireReq{Keys: &l.k, Token: l.token, Hold: l.holdID, TTL: l.ttl, Limit: limit}
	return nil
}

// holdIn returns the first hold that ctx carries for which match is true, if any: ctx's innermost
// hold, then the hold of each one's parent context (found through the locks taken inside it).
func holdIn(ctx context.Context, match func(*Lock) bool) *Lock {
	l, _ := ctx.Value(heldKey{}).(*Lock)
	for l != nil && !match(l) {
		l.mu.Lock()
		parent := l.vctx.Context
		l.mu.Unlock()
		if parent == nil {
			return nil
		}
		l, _ = parent.Value(heldKey{}).(*Lock)
	}
	return l
}
