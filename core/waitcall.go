package core

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/core/internal/wait"
)

// waitCall is one Acquire, TryAcquire or Do call's attempts (round trips) and its state between
// them, while it parks in the Client's queue until a release wakes it or its fallback delay passes.
type waitCall struct {
	c     *Client
	l     *Lock
	ao    acquireOptions
	waits bool // Acquire (wait) or TryAcquire (one attempt)
	start time.Time

	wait.Call // the call's place in the wake-up machinery (its Digest: learnDigest)

	res      store.AcquireResult // the last attempt's answer
	sent     time.Time           // when the last attempt was sent
	attempts int
	epoch    int64 // the epoch a grant to the call carries (internal/wait/grant.go)
}

// learnDigest names the call's waiter with its token's digest, asked of the server once per call.
// Without an answer the waiter stays unnamed and polls; it returns an error only when ctx ended.
func (wc *waitCall) learnDigest(ctx context.Context) error {
	if wc.W == nil || !wc.W.Unnamed() {
		return nil
	}
	if wc.Digest == "" {
		d, err := store.Digest(ctx, wc.c.st, wc.l.Token())
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return wc.notAcquired(cerr)
			}
			return nil
		}
		wc.Digest = d
	}
	wc.c.room.Named(wc.W, wc.Digest)
	return nil
}

func (wc *waitCall) run(ctx context.Context) (err error) {
	if err := ctx.Err(); err != nil {
		return wc.notAcquired(err)
	}

	if o := wc.l.outer; wc.l.nested {
		// A read-write hold nested in another (see Read) sends nothing: it shares the outer hold's
		// acquisition, if that is still held.
		wc.res = store.AcquireResult{OK: true, Fence: o.fence, Holds: o.holds + 1}
		return o.heldErr()
	}

	wc.l.req.Fair = wc.ao.fair
	defer func() {
		// Leave the local queue and, if the lock was not taken, a fair call the Redis-side one.
		wc.Leave(err == nil) // (a grant not taken is handed on by the dequeue below)
		if err != nil && wc.Handoff && wc.waits && wc.attempts > 0 {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_, _ = wc.c.st.Release(dctx, store.ReleaseReq{Keys: &wc.l.k, Waiter: wc.l.req})
			cancel()
		}
	}()

	if wc.waits && wc.ao.maxWait > 0 {
		wc.Deadline = time.After(wc.ao.maxWait) // (collected unstopped, Go 1.23 on)
	}
	if wc.Handoff {
		// Queued in Redis: the call polls often enough to stay queued, and joins the local queue
		// before its first attempt if it can, so that a grant right after it finds it.
		wc.MaxBack = min(wc.MaxBack, wc.c.opt.waiterTTL/3)
		wc.Backoff = min(wc.Backoff, wc.MaxBack)
		if wc.waits {
			wc.l.req.WaiterTTL = wc.c.opt.waiterTTL
			if wc.c.room.Subscribed(wc.l.k.Channel) && !wc.Join(wc.l.k.Channel) {
				return ErrClosed
			}
		}
	}

	for {
		if wc.W == nil && wc.waits && !wc.Handoff && wc.c.room.Busy(wc.l.k.Channel) {
			// Local waiters are queued: take a place behind them instead of barging in. (A fair
			// attempt joins the Redis-side queue and cannot barge.)
			if !wc.Join(wc.l.k.Channel) {
				return ErrClosed
			}
		} else {
			if err := ctx.Err(); err != nil && wc.attempts > 0 {
				// Cancelled while subscribing or woken: no new attempt, which could take the lock
				// for a call that gave up (leaving hands on a lock granted meanwhile).
				return wc.notAcquired(err)
			}
			if done, err := wc.attempt(ctx); done {
				return err
			}
			if wc.W == nil {
				if !wc.Join(wc.l.k.Channel) {
					return ErrClosed
				}
				// Once subscribed (or tired of waiting), try again at once: a release may have
				// come before the subscription (and granted the lock, see grant.go).
				if err := wc.parked(ctx, wc.Ready(ctx)); err != nil {
					return err
				}
				continue
			}
		}

		if err := wc.learnDigest(ctx); err != nil {
			return err
		}
		if err := wc.park(ctx); err != nil {
			return err
		}
		if done, err := wc.claim(ctx); done {
			return err
		}
	}
}

// waitMark is what an attempt tells the acquire script about its call's waiting: none for a call
// that does not wait, else whether the call waited already.
func waitMark(waits, waited bool) store.WaitMark {
	switch {
	case !waits:
		return store.MarkNone
	case waited:
		return store.MarkWaited
	}
	return store.MarkWaiting
}

// attempt makes one round trip. It reports done with the call's result, or not done when the lock
// is taken and the call waits.
func (wc *waitCall) attempt(ctx context.Context) (done bool, err error) {
	c, l, k := wc.c, wc.l, &wc.l.k
	l.req.Waiting = waitMark(wc.waits, wc.W != nil)
	if wc.attempts > 0 && !l.kind.queued() && c.st.Caps().AttemptHolds {
		// Over Redlock each attempt takes its own hold id: a failed attempt's late give-back must
		// drop only its own hold on a node, not the grant of a later attempt that re-entered it.
		l.req.Hold = l.holdID.(string) + "~" + strconv.Itoa(wc.attempts)
	}

	wc.sent = time.Now()
	r, aerr := c.st.Acquire(ctx, l.req)
	wc.RoundTrip, wc.Split = time.Since(wc.sent), r.Split
	c.reach(aerr)
	wc.attempts++
	wc.epoch = r.Epoch

	if f := c.hook.Attempt; f != nil {
		f(ctx, WaitInfo{Name: k.Name, Key: k.Main, TTL: l.ttl, Limit: l.Limit(), Mode: l.Mode(), Attempts: wc.attempts, Woken: wc.Woken,
			Acquired: r.OK, RetryAfter: r.RetryAfter, Err: aerr})
	}
	if wc.Woken && aerr == nil && !r.OK && !r.Guarded && !c.wd.holding(k.Main, l.token) {
		c.room.LostRace(wc.W) // another process took the lock we were woken for
	}
	wc.Woken = false

	if aerr != nil {
		if !c.st.Caps().Undoes && store.MayHaveRun(aerr) {
			c.giveBack(l, aerr) // (Redlock gives back what its nodes may have granted itself)
		}
		if cerr := ctx.Err(); cerr != nil {
			return true, wc.notAcquired(cerr)
		}
		return true, unavailable("acquire", aerr)
	}

	wc.res = r
	switch {
	case r.NotHeld:
		// A re-entry whose owner no longer holds the lock: this Client's holds of that
		// acquisition are lost too (their next renewal would say so).
		c.wd.lostToken(k.Main, l.token)
		return true, errors.Join(ErrNotHeld, &LostError{Name: k.Name, Reason: "not_owner"})
	case r.OK:
		l.holdID = l.req.Hold // the hold this attempt took (see above)
		return true, c.outlived(ctx, l, wc.sent)
	case r.Guarded:
		if wc.W != nil {
			// No release will follow: the next local waiter must find the guard too.
			c.room.PassOn(wc.W)
		}
		return true, &GuardedError{Name: k.Name, Key: wc.ao.guard, Value: r.Value}
	case !wc.waits:
		return true, wc.notAcquired(nil)
	}
	return false, nil
}

// park waits for a release message or the fallback delay; it returns an error when the call ends
// (its context, its wait limit, the Client's Close).
func (wc *waitCall) park(ctx context.Context) error {
	d := wc.Backoff
	if wc.res.Epoch != 0 {
		// Queued in Redis: a release hands the lock over with a grant message (grant.go); polls
		// only keep the waiter's place and catch the holder's expiry.
		d = wc.MaxBack
	}
	if wc.res.Busy && wc.res.RetryAfter+time.Millisecond < d {
		// The holder's TTL runs out first (PTTL 0: within a millisecond): be there when it does.
		d = wc.res.RetryAfter + time.Millisecond
	}
	// Waiters queued in Redis poll within a third of the queue timeout, which keeps their place;
	// a lock's waiters behind the first local one poll rarely, so that they cost Redis little.
	return wc.parked(ctx, wc.Park(ctx, d, !wc.Handoff))
}

// parked is the call's error after a Park (or Ready) that ended why: nil while it goes on. The
// wait limit's timer fires once: the call must end when its wait is the one that hears it.
func (wc *waitCall) parked(ctx context.Context, why wait.Parked) error {
	switch why {
	case wait.Cancelled:
		return wc.notAcquired(ctx.Err())
	case wait.Deadline:
		return wc.notAcquired(nil)
	case wait.Closed:
		return ErrClosed
	}
	return nil
}

func (wc *waitCall) notAcquired(cause error) error {
	return notAcquired(wc.l.k.Name, wc.res.RetryAfter, wc.attempts, wc.waits, wc.start, cause)
}

// notAcquired is the error of an acquire call that ended without the lock name, held for retry
// more, after attempts; with waits, it waited since start. cause is why, if its context ended it.
func notAcquired(name string, retry time.Duration, attempts int, waits bool, start time.Time, cause error) error {
	e := &NotAcquiredError{Name: name, RetryAfter: retry, Attempts: attempts}
	if waits {
		e.Waited = max(time.Since(start), 1)
	}
	if cause != nil {
		return errors.Join(e, cause)
	}
	return e
}

// claim takes the lock or permit a release granted to the call while it waited, or reports not
// done (no grant, or a stale one). The lease counts from the call's last attempt; a fair grant's
// is at most the queue timeout (lk_give in fair.lua). An attempt confirms instead when that lease
// is half gone, or with WithReplicaAck (the grant's write was not waited for).
func (wc *waitCall) claim(ctx context.Context) (bool, error) {
	if wc.W == nil || !wc.Handoff || ctx.Err() != nil {
		return false, nil // (cancelled: the call ends, and leaving hands a grant on)
	}
	g := wc.c.room.TakeGrant(wc.W)
	lease := wc.l.ttl
	if !wc.l.kind.queued() {
		lease = min(lease, wc.l.req.WaiterTTL)
	}

	if !g.OK || g.Epoch != wc.epoch || time.Since(wc.sent) > lease/2 || wc.c.opt.Replicas > 0 {
		return false, nil
	}
	if lease < wc.l.ttl {
		wc.l.lease = lease
	}
	wc.res = store.AcquireResult{OK: true, Fence: g.Fence, Holds: 1}
	return true, wc.c.outlived(ctx, wc.l, wc.sent)
}
