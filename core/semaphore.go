package core

import "github.com/lockkit/lockkit/core/internal/store"

// MaxPermits bounds the limit of a semaphore (Permits): 1 <= n <= MaxPermits. Adapters that take
// a limit (WithLimit) accept the same range.
const MaxPermits = 100000

// Permits makes Acquire, TryAcquire and Do take one of n permits of the semaphore named name,
// instead of the lock: at most n holders at once (1 <= n <= MaxPermits; an n out of range makes
// the call fail with ErrInvalid before anything is sent). A held permit is a *Lock with everything
// a lock has (its own token and lease, renewal, a Context cancelled before the permit can pass on,
// a Fence from the name's one sequence, Extend, TTL, WithMaxHold, hooks) except re-entry: every
// acquisition takes a new permit, so WithOwner, WithToken and WithGuard are refused with
// ErrInvalid. One name, one lock: permits share the name with permits only.
//
// Waiters queue in Redis, FIFO across processes, and a release hands its permit to the first live
// waiter directly, without another round trip; a caller that is not Fair still takes a permit that
// is free when it asks. When callers pass different limits for one name, a permit is granted only
// while fewer holders than the caller's limit and than every holder's limit hold one. Over Redlock
// (NewRedlock) Permits is refused with ErrInvalid: majorities of nodes that each count n leases do
// not bound the permits held to n. docs/guarantees.md ("Semaphores") gives the rules and the tests
// behind each.
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
	case ao.owner != "" || ao.token != "" || ao.guard != "":
		return invalid("WithOwner, WithToken and WithGuard cannot be used with Permits (a permit is never re-entered)")
	case !c.st.Caps().Permits:
		return invalid("semaphores (Permits) are not supported over Redlock: a quorum of nodes does not bound the permits held")
	}
	l.k.InitSem(c.opt.prefix, name, ao.permits)
	l.token, l.holdID = store.NewToken(), any("0")
	l.req = &store.AcquireReq{Keys: &l.k, Token: l.token, Hold: l.holdID, TTL: l.ttl, Limit: ao.permits}
	return nil
}
