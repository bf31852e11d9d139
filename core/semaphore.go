package core

// maxPermits bounds the limit of a semaphore (Permits).
const maxPermits = 100000

// Permits makes Acquire, TryAcquire and Do take one of n permits of the semaphore named name,
// instead of the lock: at most n holders at once (1 <= n <= 100000). A held permit is a *Lock
// with everything a lock has — its own owner token and TTL, renewal by the Client's watchdog, a
// Context cancelled (with cause) on Release or loss, a Fence that strictly increases among the
// permits of a name (the semaphore's own counter; the lock of the same name keeps its own fences,
// which these do not order), Extend, TTL, WithMaxHold, hooks — except
// re-entry: every acquisition takes a new permit, so WithOwner and WithGuard are refused with
// ErrInvalid. A semaphore and the lock of the same name are independent: holding one does not
// exclude the other.
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
func Permits(n int) AcquireOption { return func(o *acquireOptions) { o.permits = n } }

// Limit returns the number of permits of the semaphore a permit was taken from (Permits), or 0
// for a lock.
func (l *Lock) Limit() int {
	if l == nil || l.k.sem == nil {
		return 0
	}
	return l.k.sem.limit
}

// semKeys are the extra Redis names of a semaphore; keys.arr then holds the permits ZSET, the fence
// counter, the waiters' queue, its deadlines and the release receipt (see initSem).
type semKeys struct {
	limit                   int
	limits, fences, waiters string
	renew                   [3]string // permits, limits, fences: what a renewal touches
	acquire                 [7]string // permits, limits, fences, fence counter, queue, deadlines, waiters
}

// initSem sets k to the keys of the semaphore name (all with the {name} hash tag):
// prefix{name}:permits (ZSET token -> lease expiry), :permits:limits (ZSET token -> limit),
// :permits:fences (HASH token -> fence), :permits:queue (LIST of waiters' tokens, + :deadlines
// and :waiters, HASHes token -> deadline and token -> what a release needs to grant the waiter a
// permit), :permits:receipt, and the name's fence counter prefix{name}:fence. The release channel
// is prefix{name}:permits:released. All are substrings of one string: one allocation, as for a
// lock's keys.
func (k *keys) initSem(prefix, name string, limit int) {
	tag := prefix + "{" + name + "}"
	p := tag + ":permits"
	n := len(p)
	s := p + ":queue:deadlines" + tag + ":fence" + p + ":released" + p + ":receipt" + p + ":limits" + p + ":fences" +
		p + ":queue:waiters"
	at := func(i int, suffix string) (string, int) { return s[i : i+n+len(suffix)], i + n + len(suffix) }
	i := n + len(":queue:deadlines")
	fence := s[i : i+len(tag)+len(":fence")]
	i += len(fence)
	channel, i := at(i, ":released")
	receipt, i := at(i, ":receipt")
	limits, i := at(i, ":limits")
	fences, i := at(i, ":fences")
	waiters, _ := at(i, ":queue:waiters")
	k.name = name
	k.channel = channel
	k.arr = [5]string{s[:n], fence, s[:n+len(":queue")], s[:n+len(":queue:deadlines")], receipt}
	k.rel = [2]string{k.arr[0], k.arr[4]}
	k.sem = &semKeys{limit: limit, limits: limits, fences: fences, waiters: waiters,
		renew:   [3]string{k.arr[0], limits, fences},
		acquire: [7]string{k.arr[0], limits, fences, fence, k.arr[2], k.arr[3], waiters}}
}

// renewKeys returns the keys a renewal (or Extend) of the lock or permit touches.
func (k *keys) renewKeys() []string {
	if k.sem != nil {
		return k.sem.renew[:]
	}
	return k.arr[:1]
}

// initPermit prepares l to take a permit (Permits): checks the options and sets its keys and token.
func (c *Client) initPermit(l *Lock, ao *acquireOptions, name string) error {
	switch {
	case ao.permits < 1 || ao.permits > maxPermits:
		return invalid("permits %d outside [1, %d]", ao.permits, maxPermits)
	case ao.owner != "" || ao.guard != "":
		return invalid("WithOwner and WithGuard cannot be used with Permits (a permit is never re-entered)")
	}
	if _, ok := c.st.(*redlock); ok {
		return invalid("semaphores (Permits) are not supported over Redlock: a quorum of nodes does not bound the permits held")
	}
	l.k.initSem(c.opt.prefix, name, ao.permits)
	l.token = newToken()
	l.tok, l.hold = l.token, any("0")
	l.req = acquireReq{token: l.tok, hold: l.hold, ttl: l.ttl, limit: ao.permits}
	return nil
}
