package core

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/core/internal/wait"
	"github.com/redis/go-redis/v9"
)

// Client takes locks on Redis. It is safe for concurrent use. One Client runs at most four
// goroutines whatever the number of locks: the renewal watchdog, the reader and writer of the
// shared release subscription, and the eviction check. They start when first needed (the eviction
// check with the first acquisition) and stop on Close. (A Redlock Client also has one worker per
// request in flight, see NewRedlock. The automatic pipeliner of WithPipelining, built when many
// commands are first in flight at once, runs goroutines of the go-redis client, which stop when
// that client is closed.)
type Client struct {
	id      string       // random, published in release messages and prefixed to hold ids
	holdIDs atomic.Int64 // hold ids of re-entering acquisitions
	st      store.Store
	opt     options
	hook    Hook
	wd      *watchdog
	room    *wait.Queues
	closed  atomic.Bool
	down    atomic.Bool      // the last request found Redis unreachable (reach.go)
	backs   *store.GiveBacks // give-backs of acquisitions whose reply was lost
	scratch *store.Scratches // what an acquisition or a release needs only while it runs
	evict   *evictionCheck   // whether the servers may evict lock keys (eviction.go)
}

// log reports msg at level with attrs to the Client's logger (WithLogger).
func (c *Client) log(level slog.Level, msg string, attrs ...slog.Attr) {
	cmp.Or(c.opt.logger, slog.Default()).LogAttrs(context.Background(), level, "lockkit: "+msg, attrs...)
}

// New returns a Client over a go-redis client: a plain client, a Sentinel failover client or a
// Cluster client. It sends nothing to Redis.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if isNil(rdb) {
		return nil, invalid("core.New: rdb is nil")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	id := wait.ClientIDPrefix + store.NewToken()[:16]
	n := store.NewNode(rdb, id, o.store())
	n.Fenced = true
	return newClient(n, o, id, 0, []redis.UniversalClient{rdb}), nil
}

// NewRedlock returns a Client whose locks live on a quorum of independent Redis nodes (the Redlock
// algorithm): an acquisition succeeds on N/2+1 nodes within its validity (TTL − elapsed − drift);
// renewals need a quorum; releases go to every node. Requests to the nodes run in parallel, each
// bounded by the per-node timeout (WithNodeTimeout), so a slow or dead node costs at most that; and
// Acquire, Release and Extend return once a quorum has answered, so a slow node usually costs
// nothing. (The slower nodes' grants are kept after a successful acquisition, and their releases
// finish in the background; a release goes to such a node only once the acquisition's request to
// it returned.) The requests run on worker goroutines that the Client reuses from one request to
// the next; a worker exits after one to two seconds without work, or on Close.
// The API is the same as New's, except Fair (not supported: each node would keep its own queue).
//
// Fencing tokens stay monotonic across quorums: the fence is the maximum of the quorum's counters,
// and before Acquire returns it is written back (counter = max(counter, fence)) to a quorum unless a
// quorum already had it. This holds as long as nodes keep their data: run them with persistence
// (appendonly yes, appendfsync always) or a restarted node may hand out an old fence.
func NewRedlock(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, invalid("redlock needs at least one node")
	}
	for i, n := range nodes {
		if isNil(n) {
			return nil, invalid("redlock node %d is nil", i)
		}
		if _, ok := n.(*redis.ClusterClient); ok {
			return nil, invalid("redlock node %d is a cluster client; use independent masters", i)
		}
	}

	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	id := wait.ClientIDPrefix + store.NewToken()[:16]
	rl := store.NewRedlock(nodes, id, o.store())
	return newClient(rl, o, id, rl.Quorum(), nodes), nil
}

// isNil reports whether rdb is nil or a typed nil pointer, which would panic at the first command.
func isNil(rdb redis.UniversalClient) bool {
	v := reflect.ValueOf(rdb)
	return !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil()
}

// newClient returns the Client over st, on the Redis servers nodes; quorum > 0: Redlock's.
func newClient(st store.Store, o options, id string, quorum int, nodes []redis.UniversalClient) *Client {
	c := &Client{id: id, st: st, opt: o, hook: chainHooks(o.hooks)}
	c.backs = store.NewGiveBacks(st, func(name string, ttl time.Duration, err error) {
		c.log(slog.LevelWarn, "giving a lock back failed; it expires within its TTL",
			slog.String("name", name), slog.Duration("ttl", ttl), slog.Any("error", err))
	})
	c.wd = newWatchdog(c)
	c.scratch = store.NewScratches(st)
	c.room = wait.NewQueues(st.Caps().Router, id, quorum)
	c.evict = newEvictionCheck(nodes, c.log)
	return c
}

// Prefix returns the prefix of the Client's Redis keys (WithPrefix; default "lockkit:"). Adapters
// build their own keys (idempotency records, cron markers) under it, so one ACL key pattern covers
// everything lockkit stores.
func (c *Client) Prefix() string { return c.opt.prefix }

// Acquire takes the named lock for ttl (10ms to 24h), waiting while another owner holds it: until it
// is acquired, ctx ends, or the WithWait limit passes. A waiter is woken as soon as the holder
// releases; it also retries when the holder's TTL runs out. Without a deadline on ctx and without
// WithWait, Acquire waits as long as it takes.
//
// If ctx is (derived from) the context of a Lock on the same name from this Client, or WithOwner
// names the holder, Acquire re-enters the lock: it succeeds at once and the lock is freed when every
// hold is released.
//
// With Permits(n), Acquire takes one of the n permits of the semaphore name instead, waiting while
// all are taken (see Permits).
//
// Errors match ErrNotAcquired (joined with ctx.Err() when ctx ended the wait), ErrInvalid, ErrClosed,
// ErrUnavailable (an outage) or ErrMisconfigured (Redis refused the credentials, a grant or a
// command: the call fails at once, whatever its wait).
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	return c.acquire(ctx, name, ttl, true, opts)
}

// TryAcquire is Acquire without waiting: one round trip to Redis. If another owner holds the lock it
// returns a *NotAcquiredError whose RetryAfter is the holder's remaining TTL.
func (c *Client) TryAcquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	return c.acquire(ctx, name, ttl, false, opts)
}

// Do acquires the named lock (waiting as Acquire does), runs fn with the lock's context and releases
// the lock, also when fn panics. The lock is renewed while fn runs. If the lock is lost while fn runs,
// fn's context is cancelled and Do returns an error matching ErrLost, joined with fn's error.
// Otherwise it returns fn's error, or the release error. A nil fn is refused with ErrInvalid,
// before anything is sent.
func (c *Client) Do(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context) error, opts ...AcquireOption) (err error) {
	if fn == nil {
		return invalid("core.Do: fn is nil")
	}
	l, err := c.Acquire(ctx, name, ttl, opts...)
	if err != nil {
		return err
	}

	defer func() {
		rerr := l.Release(ctx) // (not cut short by ctx)
		switch lost := l.lostCause(); {
		case lost != nil: // lost, or ended by WithMaxHold
			err = errors.Join(lost, err)
		case err == nil && !errors.Is(rerr, ErrNotHeld):
			err = rerr
		case rerr != nil && !errors.Is(rerr, ErrNotHeld): // fn's error wins: say what happened
			c.log(slog.LevelWarn, "release failed after the function returned an error", slog.String("name", name),
				slog.Any("error", rerr))
		}
	}()
	return fn(l.Context())
}

// Close releases every lock the Client holds (their contexts are cancelled with ErrClosed as the
// cause), wakes every waiter with ErrClosed and stops the Client's goroutines. Calls after Close
// return ErrClosed. It returns the first release error. A nil ctx is refused with ErrInvalid and
// the Client stays open. While Redis does not answer (the Client's last request found it
// unreachable), Close gives the releases at most 200 ms: the locks expire within their TTL.
func (c *Client) Close(ctx context.Context) error {
	switch {
	case c == nil:
		return invalid("Close on a nil *Client")
	case ctx == nil:
		return invalid("ctx is nil (the Client stays open)")
	}

	if c.closed.Swap(true) {
		return nil
	}
	if c.down.Load() {
		// Redis did not answer the last request: the releases would only wait for go-redis's dials
		// (issue #45).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
	}

	c.evict.close()
	c.room.Close()
	c.backs.Close(ctx)
	closed := func(*Lock) error { return ErrClosed }
	err := endAll(ctx, c.wd.close(ctx), stateClosed, closed, giveNow)
	c.st.Close()
	return err
}

func (c *Client) acquire(ctx context.Context, name string, ttl time.Duration, waits bool, opts []AcquireOption) (*Lock, error) {
	if ctx == nil {
		return nil, invalid("ctx is nil")
	}

	ao, err := applyAcquireOptions(opts, c.opt.maxHold)
	if err != nil {
		return nil, err
	}
	name, err = ao.qualify(name, ttl)
	if err != nil {
		return nil, err
	}

	switch {
	case ao.owner != "" && ao.token != "":
		return nil, invalid("WithOwner and WithToken cannot be combined")
	case ao.guard != "" && (ao.fair || !store.SameSlot(ao.guard, name) || len(ao.guard) > 2*store.MaxName):
		return nil, invalid("guard key (%d bytes) must have the lock's hash tag {name} as its first and cannot be used with Fair", len(ao.guard))
	case ao.fair && !c.st.Caps().Fair:
		return nil, invalid("fair mode is not supported over Redlock")
	case c.closed.Load():
		return nil, ErrClosed
	}

	c.evict.start()
	l := &Lock{c: c, ttl: ttl, fair: ao.fair, limit: ao.maxHold}
	switch {
	case ao.rw == rwWrite:
		l.kind = kindWrite
	case ao.rw != 0:
		l.kind = kindRead
	case ao.permits != 0:
		l.kind = kindPermit
	}

	// A hold of name by this Client in ctx of a kind l cannot nest in (kind.nestsIn): l would wait
	// for that hold to end.
	h := holdIn(ctx, func(h *Lock) bool { return h.c == c && h.k.Name == name && h.heldErr() == nil })
	if h != nil && !l.kind.nestsIn(h.kind) {
		return nil, invalid("%q is held by this context's %s: a %s of the same name would wait for it (one name, one lock; release it first)",
			name, h.kind, l.kind)
	}

	var sc *store.Scratch
	switch l.kind {
	case kindLock:
		sc = c.initLock(ctx, l, &ao, name)
	case kindPermit:
		err = c.initPermit(l, &ao, name)
	default: // a side of the read-write lock (rwlock.go)
		err = c.initRW(ctx, l, &ao, name)
	}
	if err != nil {
		return nil, err
	}

	// Run the acquire call (its request in sc, if not nil), then hand the Lock out.
	wc := waitCall{c: c, l: l, ao: ao, waits: waits, start: time.Now()} // (waitcall.go)
	wc.Call = wait.Call{Q: c.room, Handoff: ao.fair || l.kind.queued(), Backoff: c.opt.backoffMin, MaxBack: c.opt.backoffMax}
	info := WaitInfo{Name: l.k.Name, Key: l.k.Main, TTL: l.ttl, Limit: l.Limit(), Mode: l.Mode()}
	hctx := hooked(ctx, c.hook.WaitStart, info)

	err = wc.run(hctx)
	l.req = nil // (a held lock does not keep its request)
	if sc != nil {
		// (Only then: over Redlock a node's request may still read l.k, see Scratches.Take.)
		l.k.Lines = nil
		c.scratch.Put(sc, err == nil || answered(err))
	}

	if f := c.hook.WaitDone; f != nil {
		info.Attempts, info.Duration, info.Outcome, info.Err = wc.attempts, time.Since(wc.start), outcome(err), err
		f(hctx, info)
	}
	if err != nil {
		return nil, err
	}
	return c.handOut(ctx, hctx, l, wc.res.Fence, wc.res.Holds, wc.sent)
}

// initLock prepares l to take the lock name: afresh, or re-entering the hold that ctx carries or
// the owner's (WithOwner, WithToken). It returns the scratch that holds l's request, if any.
func (c *Client) initLock(ctx context.Context, l *Lock, ao *acquireOptions, name string) *store.Scratch {
	given := ao.owner + ao.token
	token := given
	if given == "" {
		token = l.k.InitNew(c.opt.prefix, name) // a fresh token, unless the context holds the lock
	} else {
		l.k.Init(c.opt.prefix, name)
	}

	l.token, l.holdID = token, any("0") // a fresh token's first hold: unique for that token
	o := holdIn(ctx, func(h *Lock) bool { return h.c == c && h.k.Main == l.k.Main })
	if o != nil && (given == "" || o.token == l.token) {
		l.outer, l.token = o, o.token // (with a token given: only a hold of that token)
	}
	if given != "" || l.outer != nil {
		l.holdID = c.id + "/" + strconv.FormatInt(c.holdIDs.Add(1), 10) // unique among the owner's holds
	}

	sc := c.scratch.Take()
	if sc != nil {
		sc.TTLMS = store.MS(l.ttl)
		sc.Req = store.AcquireReq{Token: l.token, Hold: l.holdID, TTL: l.ttl, TTLArg: &sc.TTLMS}
		l.req, l.k.Lines = &sc.Req, &sc.Lines
	} else {
		l.req = &store.AcquireReq{Token: l.token, Hold: l.holdID, TTL: l.ttl, TTLArg: store.MS(l.ttl)}
	}

	switch {
	case l.outer != nil && c.st.Caps().ReentryFence:
		l.req.Entry = l.outer.fence // the acquisition the context holds, and no other
	case l.outer != nil || ao.owner != "":
		l.req.Entry = "0" // any acquisition of the token (Redlock's nodes may record different fences)
	}
	l.req.Keys = &l.k
	l.req.Guard = ao.guard
	return sc
}

// handOut makes l, acquired with fence and holds by an attempt sent at sent, a held lock: its
// maximum hold, the Acquired hook (under hctx), its context, its place in the watchdog.
func (c *Client) handOut(ctx, hctx context.Context, l *Lock, fence, holds int64, sent time.Time) (*Lock, error) {
	l.fence, l.holds, l.acquired = fence, holds, time.Now()
	if l.limit > 0 {
		l.maxAt = l.acquired.Add(l.limit)
	}
	if o := l.outer; o != nil && !o.maxAt.IsZero() && (l.maxAt.IsZero() || o.maxAt.Before(l.maxAt)) {
		l.maxAt, l.limit = o.maxAt, o.limit // work nested in a limited hold ends with it
	}

	l.k.Held(fence)
	held := 0
	if c.hook.Acquired != nil && !l.nested && !c.wd.holding(l.k.Main, l.token) {
		held = 1
	}
	parent := hooked(hctx, c.hook.Acquired, HoldInfo{Lock: l, TTL: l.ttl, Held: held})

	l.mu.Lock() // (the Acquired hook may have handed l to another goroutine)
	l.vctx = valueCtx[heldKey, *Lock]{Context: parent, v: l}
	l.mu.Unlock()

	if !c.wd.add(l, sent, held) {
		l.endHeld, l.endLast = -held, held > 0 // (the watchdog never saw l)
		if l.begin(stateClosed, ErrClosed) {
			_ = l.giveUp(context.WithoutCancel(ctx), stateClosed, giveNow, nil)
		}
		if l.nested {
			return nil, errors.Join(ErrNotHeld, l.outer.lostCause()) // (its outer hold ended meanwhile)
		}
		return nil, ErrClosed
	}
	return l, nil
}

// answered reports whether an acquisition's error came from Redis's answers alone (the lock is
// taken, or a guard), not from a lost reply or an ended context.
func answered(err error) bool {
	return (errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrGuarded)) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
