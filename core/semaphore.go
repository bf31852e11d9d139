package core

import "github.com/lockkit/lockkit/core/internal/store"

// MaxPermits bounds the limit of a semaphore (Permits): 1 <= n <= MaxPermits. Adapters that take
// a limit (WithLimit) accept the same range.
const MaxPermits = 100000

// Permits makes Acquire, TryAcquire and Do take one of n permits of the semaphore named name,
// instead of the lock: at most n holders at once (1 <= n <= MaxPermits). A held permit is a *Lock
// with everything a lock has — its own owner token and TTL, renewal by the Client's watchdog, a
// Context cancelled (with cause) on Release or loss, a Fence from the name's one sequence
// (strictly increasing across every kind of hold of the name), Extend, TTL, WithMaxHold, hooks —
// except re-entry: every acquisition takes a new permit, so WithOwner and WithGuard are refused with
// ErrInvalid. One name, one lock: permits share the name with permits only; while a lock, a write
// or reads of the name are held no permit is granted, and while permits are held none of those is
// (see docs/guarantees.md, "One name, one lock").
//
// Waiters queue in Redis, in FIFO order across processes, and a release hands its permit to the
// first live waiter directly: the release creates the waiter's lease and fence, and its message
// wakes that waiter, which holds at once, without another round trip (one waiter per freed permit,
// no herd). A caller that is not Fair still takes a permit that is free when it asks (one freed by
// an expired lease), even if others are queued; a Fair caller queues behind them. Queued waiters
// poll at least every third of the fair waiter timeout (WithFairWaiterTimeout) to stay queued; a
// waiter that gives up leaves the queue and hands on a permit granted to it meanwhile; a permit
// granted to a waiter that died is a lease like any other and frees up after its TTL. The lease of
// a holder that crashed is reclaimed by the first acquisition or release after it expired. If callers pass different limits for one name, a permit is granted
// only while fewer holders than the caller's own limit and than every current holder's limit hold
// one: no holder ever shares the semaphore with more holders than its own limit allows. Lowering
// n takes effect at once; raising it takes effect as the holders with the lower limit leave.
//
// Semaphores work on a plain, Sentinel or Cluster client (every key of a semaphore has the {name}
// hash tag). Over Redlock (NewRedlock) the call fails with ErrInvalid: majorities of nodes that
// each count at most n leases do not bound the permits held to n (with 3 nodes and n = 2, permits
// granted by {A,B}, {B,C} and {A,C} are 3), and a quorum large enough to bound them would lose
// Redlock's tolerance of failed nodes.
//
// An n out of range makes the call fail with ErrInvalid, before anything is sent (Permits(0) is not
// the lock).
func Permits(n int) AcquireOption {
	if n < 1 || n > MaxPermits {
		return refusing(invalid("core.Permits: n must be 1..MaxPermits (%d), got %d", MaxPermits, n))
	}
	return func(o *acquireOptions) { o.permits = n }
}

// Limit returns the number of permits of the semaphore a permit was taken from (Permits), or 0
// for a lock or a read-write lock.
func (l *Lock) Limit() int {
	if l == nil || l.kind != kindPermit {
		return 0
	}
	return l.k.Sem.Limit
}

// initPermit prepares l to take a permit (Permits): checks the options and sets its keys and token.
func (c *Client) initPermit(l *Lock, ao *acquireOptions, name string) error {
	switch {
	case ao.permits < 1 || ao.permits > MaxPermits:
		return invalid("permits %d outside [1, %d]", ao.permits, MaxPermits)
	case ao.owner != "" || ao.token != "" || ao.guard != "":
		return invalid("WithOwner, WithToken and WithGuard cannot be used with Permits (a permit is never re-entered)")
	}
	if !c.st.Caps().Permits {
		return invalid("semaphores (Permits) are not supported over Redlock: a quorum of nodes does not bound the permits held")
	}
	l.kind = kindPermit
	l.k.InitSem(c.opt.prefix, name, ao.permits)
	l.token = store.NewToken()
	l.tok, l.hold = l.token, any("0")
	l.req = &store.AcquireReq{Token: l.tok, Hold: l.hold, TTL: l.ttl, Limit: ao.permits}
	return nil
}
