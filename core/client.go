package core

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client takes locks on Redis. It is safe for concurrent use. One Client runs at most three
// goroutines whatever the number of locks: the renewal watchdog, and the reader and writer of the
// shared release subscription. They start when first needed and stop on Close.
type Client struct {
	id     string       // random, published in release messages and prefixed to hold ids
	holds  atomic.Int64 // hold ids of re-entering acquisitions
	st     store
	opt    options
	hook   *Hook
	wd     *watchdog
	room   *waitRoom
	closed atomic.Bool
	bgMu   sync.Mutex
	bg     sync.WaitGroup // give-backs of acquisitions whose reply was lost
	bgDone bool           // Close waited for bg: no more give-backs in the background
	bgCtx  context.Context
	bgStop context.CancelFunc
}

// New returns a Client over a go-redis client: a plain client, a Sentinel failover client or a
// Cluster client. It sends nothing to Redis.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if rdb == nil {
		return nil, invalid("redis client is nil")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	s := loadScripts()
	id := clientIDPrefix + newToken()[:16]
	n := newNode(rdb, &s, id)
	n.replicas, n.replicaWait, n.label = o.replicas, o.replicaWait, holderLabel(o.label)
	return newClient(n, o, id, 0), nil
}

func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	return o, o.validate()
}

func newClient(st store, o options, id string, quorum int) *Client {
	c := &Client{id: id, st: st, opt: o, hook: chainHooks(o.hooks)}
	c.bgCtx, c.bgStop = context.WithCancel(context.Background())
	c.wd = newWatchdog(c)
	c.room = newWaitRoom(st.router(), id, quorum)
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
// Errors match ErrNotAcquired (joined with ctx.Err() when ctx ended the wait), ErrInvalid, ErrClosed
// or ErrUnavailable.
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
// Otherwise it returns fn's error, or the release error.
func (c *Client) Do(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context) error, opts ...AcquireOption) (err error) {
	l, err := c.Acquire(ctx, name, ttl, opts...)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl)
		rerr := l.Release(rctx)
		cancel()
		if lost := l.lostCause(); lost != nil { // lost, or ended by WithMaxHold
			err = errors.Join(lost, err)
		} else if err == nil && !errors.Is(rerr, ErrNotHeld) {
			err = rerr
		}
	}()
	return fn(l.ctx)
}

// Close releases every lock the Client holds (their contexts are cancelled with ErrClosed as the
// cause), wakes every waiter with ErrClosed and stops the Client's goroutines. Calls after Close
// return ErrClosed. It returns the first release error.
func (c *Client) Close(ctx context.Context) error {
	if c.closed.Swap(true) {
		return nil
	}
	c.room.close()
	c.waitBackground(ctx)
	var first error
	for _, l := range c.wd.close() {
		l.cancel(ErrClosed)
		n, err := c.st.release(ctx, &l.k, l.tok, l.hold, l.fair, l.ttl)
		if err != nil {
			err = unavailable("release", err)
			if first == nil {
				first = err
			}
		}
		l.setState(stateClosed)
		l.reportReleased(max(n, 0), err)
	}
	return first
}

func (c *Client) acquire(ctx context.Context, name string, ttl time.Duration, wait bool, opts []AcquireOption) (*Lock, error) {
	var ao acquireOptions
	if len(opts) > 0 {
		p := new(acquireOptions) // options escape; spare the no-option call an allocation
		for _, f := range opts {
			f(p)
		}
		ao = *p
	}
	if err := validate(name, ttl); err != nil {
		return nil, err
	}
	if len(ao.owner) > maxToken || strings.IndexByte(ao.owner, 0) >= 0 || ao.maxWait < 0 || ao.maxHold < 0 {
		return nil, invalid("owner token over %d bytes or with a NUL byte, or negative wait or maximum hold", maxToken)
	}
	if ao.guard != "" && (ao.fair || !sameSlot(ao.guard, name) || len(ao.guard) > 2*maxNameLen) {
		return nil, invalid("guard key (%d bytes) must have the lock's hash tag {name} as its first and cannot be used with Fair", len(ao.guard))
	}
	if _, ok := c.st.(*redlock); ok && ao.fair {
		return nil, invalid("fair mode is not supported over Redlock")
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	l := &Lock{c: c, ttl: ttl, fair: ao.fair, limit: c.opt.maxHold}
	if ao.limited {
		l.limit = ao.maxHold
	}
	l.k.init(c.opt.prefix, name)
	l.token = ao.owner
	l.outer = heldIn(ctx, c, l.k.lock())
	l.hold = any("0") // a fresh token's first hold: unique for that token
	if l.token == "" {
		if l.outer != nil {
			l.token = l.outer.token
		} else {
			l.token = newToken()
		}
	}
	if l.token != "" && (ao.owner != "" || l.outer != nil) {
		l.hold = c.id + "/" + strconv.FormatInt(c.holds.Add(1), 10) // unique among the owner's holds
	}
	l.tok = l.token
	l.req = acquireReq{token: l.tok, hold: l.hold, ttl: ttl}
	if ao.guard != "" {
		l.req.guard = []string{l.k.arr[0], l.k.arr[1], ao.guard}
	}
	start := time.Now()
	hctx := ctx
	h := c.hook
	if h != nil && h.WaitStart != nil {
		if x := h.WaitStart(ctx, HookInfo{Name: name, Key: l.k.lock(), TTL: ttl}); x != nil {
			hctx = x
		}
	}
	res, sent, attempts, err := c.wait(hctx, l, wait, &ao, start)
	if h != nil && h.WaitDone != nil {
		h.WaitDone(hctx, HookInfo{Name: name, Key: l.k.lock(), Attempts: attempts, Duration: time.Since(start),
			Outcome: Outcome(err), Err: err})
	}
	if err != nil {
		return nil, err
	}
	l.fence, l.holds, l.acquired = res.fence, res.holds, time.Now()
	if l.limit > 0 {
		l.maxAt = l.acquired.Add(l.limit)
	}
	if o := l.outer; o != nil && !o.maxAt.IsZero() && (l.maxAt.IsZero() || o.maxAt.Before(l.maxAt)) {
		l.maxAt, l.limit = o.maxAt, o.limit // work nested in a limited hold ends with it
	}
	l.k.held(res.fence)
	parent := hctx
	if h != nil && h.Acquired != nil {
		if x := h.Acquired(hctx, HookInfo{Name: name, Key: l.k.lock(), TTL: ttl, Fence: res.fence, Holds: res.holds,
			Reentrant: res.holds > 1}); x != nil {
			parent = x
		}
	}
	l.vctx = valueCtx{Context: parent, l: l}
	l.ctx, l.cancel = context.WithCancelCause(&l.vctx)
	if !c.wd.add(l, sent) {
		l.cancel(ErrClosed)
		_, _ = c.st.release(context.WithoutCancel(ctx), &l.k, l.tok, l.hold, l.fair, l.ttl)
		return nil, ErrClosed
	}
	return l, nil
}

// wait runs the acquire attempts of one call.
func (c *Client) wait(ctx context.Context, l *Lock, wait bool, ao *acquireOptions, start time.Time) (res acquireResult, sent time.Time, attempts int, err error) {
	k := &l.k
	var (
		w        *waiter
		woken    bool
		backoff  = c.opt.backoffMin
		maxBack  = c.opt.backoffMax
		deadline <-chan time.Time
		timer    *time.Timer
		fairTTL  time.Duration
	)
	if ao.fair {
		maxBack = min(maxBack, c.opt.waiterTTL/3)
		l.req.fair = true
		if wait {
			fairTTL = c.opt.waiterTTL
			l.req.waiterTTL = fairTTL
		}
	}
	notAcquired := func(cause error) error {
		e := &NotAcquiredError{Name: k.name, RetryAfter: res.retryAfter, Attempts: attempts}
		if wait {
			e.Waited = max(time.Since(start), 1)
		}
		if cause != nil {
			return errors.Join(e, cause)
		}
		return e
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if w != nil {
			c.room.leave(w, err == nil)
		}
		if err != nil && ao.fair && fairTTL > 0 && attempts > 0 {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = c.st.dequeue(dctx, k, l.tok)
			cancel()
		}
	}()
	if err := ctx.Err(); err != nil {
		return res, sent, 0, notAcquired(err)
	}
	if wait && ao.maxWait > 0 {
		dt := time.NewTimer(ao.maxWait)
		defer dt.Stop()
		deadline = dt.C
	}
	for {
		if w == nil && wait && !ao.fair && c.room.busy(k.channel) {
			// Local waiters are queued: take a place behind them instead of barging in. (In fair
			// mode the attempt itself joins the Redis-side queue and cannot barge.)
			if w = c.room.join(k.channel, l.token, ao.fair); w == nil {
				return res, sent, attempts, ErrClosed
			}
		} else {
			sent = time.Now()
			r, aerr := c.st.acquire(ctx, k, &l.req)
			attempts++
			if h := c.hook; h != nil && h.Attempt != nil {
				h.Attempt(ctx, HookInfo{Name: k.name, Key: k.lock(), Attempts: attempts, Woken: woken, Acquired: r.ok,
					RetryAfter: r.retryAfter, Err: aerr})
			}
			if woken && aerr == nil && !r.ok && !r.guarded && !c.wd.holds(k.lock()) {
				c.room.lostRace(w) // another process took the lock we were woken for
			}
			woken = false
			if aerr != nil {
				if _, rl := c.st.(*redlock); !rl && mayHaveRun(aerr) {
					c.giveBack(l) // (Redlock gives back what its nodes may have granted itself)
				}
				if cerr := ctx.Err(); cerr != nil {
					return res, sent, attempts, notAcquired(cerr)
				}
				return res, sent, attempts, unavailable("acquire", aerr)
			}
			res = r
			if r.ok {
				if err := c.outlived(ctx, l, sent); err != nil {
					return res, sent, attempts, err
				}
				return res, sent, attempts, nil
			}
			if r.guarded {
				if w != nil {
					// No release will follow (the lock stays free behind the guard): the next
					// local waiter must find the guard too.
					c.room.passOn(w)
				}
				return res, sent, attempts, &GuardedError{Name: k.name, Key: ao.guard, Value: r.value}
			}
			if !wait {
				return res, sent, attempts, notAcquired(nil)
			}
			if w == nil {
				if w = c.room.join(k.channel, l.token, ao.fair); w == nil {
					return res, sent, attempts, ErrClosed
				}
				// Subscribed (or given up waiting for it): try again at once, as a release may have
				// come between the attempt and the subscription.
				c.ready(ctx, w, deadline, backoff)
				continue
			}
		}
		head := c.room.requeue(w)
		d := backoff
		if res.busy && res.retryAfter+time.Millisecond < d {
			// The holder's TTL runs out first (PTTL 0: within a millisecond): be there when it does.
			d = res.retryAfter + time.Millisecond
		}
		if !head && !ao.fair {
			// Only the first local waiter polls as a fallback; the others are woken in turn and
			// poll rarely, so that many parked waiters cost Redis almost nothing. (Every fair
			// waiter polls within a third of its queue timeout: the poll keeps its place in the
			// Redis-side queue, which would drop it otherwise.)
			d = max(d, 10*maxBack)
		}
		d = d/2 + rand.N(d/2+1)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-w.wake:
			// The backoff is not reset: a waiter that loses the race keeps its fallback long,
			// and the next release wakes it anyway.
			woken = true
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
			backoff = min(backoff*2, maxBack)
		case <-ctx.Done():
			return res, sent, attempts, notAcquired(ctx.Err())
		case <-deadline:
			return res, sent, attempts, notAcquired(nil)
		case <-c.room.closed:
			return res, sent, attempts, ErrClosed
		}
	}
}

// ready waits until w's channel subscription is confirmed, or at most d.
func (c *Client) ready(ctx context.Context, w *waiter, deadline <-chan time.Time, d time.Duration) {
	select {
	case <-w.q.ready:
		return
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.q.ready:
	case <-t.C:
	case <-ctx.Done():
	case <-deadline:
	case <-c.room.closed:
	}
}

// lost cancels locks whose entry the watchdog gave up.
func (c *Client) lost(locks []*Lock, why string, err error) {
	for _, l := range locks {
		cause := &LostError{Name: l.k.name, Reason: why, Err: err}
		if !l.setLost(cause) {
			continue
		}
		if h := c.hook; h != nil && h.Lost != nil {
			h.Lost(l.ctx, HookInfo{Name: l.k.name, Key: l.k.lock(), Fence: l.fence, Duration: time.Since(l.acquired), Err: cause})
		}
		l.cancel(cause)
	}
}
