package core

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/core/internal/wait"
)

// waitCall is one Acquire, TryAcquire or Do call's attempts, and its state between them: an
// attempt is one acquire round trip; between attempts a waiting call parks in the Client's queue
// for the lock's release channel, until a release wakes it or its fallback delay passes.
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

// learnDigest names the call's waiter with its token's digest, asking the server for it once per
// call. Without an answer the waiter stays unnamed and polls (as a waiter that missed a message
// does); it returns an error only when ctx ended.
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

// nest is the wait of a nested read-write hold (see Read): nothing is sent; the outer hold's
// acquisition is shared if the outer hold is still held.
func (wc *waitCall) nest(ctx context.Context) error {
	o := wc.l.outer
	if err := ctx.Err(); err != nil {
		return wc.notAcquired(err)
	}
	if err := o.heldErr(); err != nil {
		return err
	}
	wc.res = store.AcquireResult{OK: true, Fence: o.fence, Holds: o.holds + 1}
	return nil
}

func (wc *waitCall) run(ctx context.Context) (err error) {
	if wc.l.nested {
		return wc.nest(ctx) // a read-write hold nested in another: no round trip
	}
	wc.l.req.Fair = wc.ao.fair
	defer func() { wc.finish(ctx, err) }()
	if err := ctx.Err(); err != nil {
		return wc.notAcquired(err)
	}
	if wc.waits && wc.ao.maxWait > 0 {
		dt := time.NewTimer(wc.ao.maxWait)
		defer dt.Stop()
		wc.Deadline = dt.C
	}
	if wc.Handoff {
		if err := wc.handoffStart(); err != nil {
			return err
		}
	}
	for {
		if wc.W == nil && wc.waits && !wc.Handoff && wc.c.room.Busy(wc.l.k.Channel) {
			// Local waiters are queued: take a place behind them instead of barging in. (In fair
			// mode the attempt itself joins the Redis-side queue and cannot barge.)
			if err := wc.join(); err != nil {
				return err
			}
		} else {
			if err := ctx.Err(); err != nil && wc.attempts > 0 {
				// Cancelled while subscribing or woken: no new attempt (it could take the lock for a
				// call that gave up); finish leaves the queue and hands on a lock granted meanwhile.
				return wc.notAcquired(err)
			}
			done, err := wc.attempt(ctx)
			if done {
				return err
			}
			if wc.W == nil {
				if err := wc.join(); err != nil {
					return err
				}
				// Subscribed (or given up waiting for it): try again at once, as a release may have
				// come between the attempt and the subscription (and granted the lock to a queued
				// waiter, see internal/wait/grant.go).
				if err := wc.ready(ctx); err != nil {
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

// attempt makes one round trip. It reports done with the call's result, or not done when the lock
// is taken and the call waits.
func (wc *waitCall) attempt(ctx context.Context) (done bool, err error) {
	c, l, k := wc.c, wc.l, &wc.l.k
	switch {
	case !wc.waits:
		l.req.Waiting = store.MarkNone
	case wc.W == nil:
		l.req.Waiting = store.MarkWaiting
	default:
		l.req.Waiting = store.MarkWaited
	}
	if wc.attempts > 0 && !wc.l.kind.queued() && c.st.Caps().AttemptHolds {
		// Each Redlock attempt after the first takes its own hold id: a failed attempt's give-back
		// (undo) may reach a node after a later attempt of this call was granted there (the node
		// kept the failed attempt's grant, which the later one re-entered), and must drop only its
		// own hold, not the later grant.
		l.req.Hold = l.holdID.(string) + "~" + strconv.Itoa(wc.attempts)
	}
	wc.sent = time.Now()
	r, aerr := c.st.Acquire(ctx, l.req)
	wc.RoundTrip, wc.Split = time.Since(wc.sent), r.Split
	c.reach(aerr)
	wc.attempts++
	wc.epoch = r.Epoch
	if h := c.hook; h != nil && h.Attempt != nil {
		h.Attempt(ctx, WaitInfo{Name: k.Name, Key: k.Main, TTL: l.ttl, Limit: l.Limit(), Mode: l.Mode(), Attempts: wc.attempts, Woken: wc.Woken,
			Acquired: r.OK, RetryAfter: r.RetryAfter, Err: aerr})
	}
	if wc.Woken && aerr == nil && !r.OK && !r.Guarded && !c.wd.holding(k.Main, l.token) {
		c.room.LostRace(wc.W) // another process took the lock we were woken for
	}
	wc.Woken = false
	switch {
	case aerr != nil:
		if !c.st.Caps().Undoes && store.MayHaveRun(aerr) {
			c.giveBack(l, aerr) // (Redlock gives back what its nodes may have granted itself)
		}
		if cerr := ctx.Err(); cerr != nil {
			return true, wc.notAcquired(cerr)
		}
		return true, unavailable("acquire", aerr)
	case r.NotHeld:
		// A re-entry whose owner no longer holds the lock: this Client's holds of that
		// acquisition are lost too (their next renewal would say so).
		wc.res = r
		lost := &LostError{Name: k.Name, Reason: "not_owner"}
		c.wd.lostToken(k.Main, l.token)
		return true, errors.Join(ErrNotHeld, lost)
	case r.OK:
		wc.res = r
		l.holdID = l.req.Hold // the hold this attempt took (see above)
		return true, c.outlived(ctx, l, wc.sent)
	case r.Guarded:
		wc.res = r
		if wc.W != nil {
			// No release will follow (the lock stays free behind the guard): the next local waiter
			// must find the guard too.
			c.room.PassOn(wc.W)
		}
		return true, &GuardedError{Name: k.Name, Key: wc.ao.guard, Value: r.Value}
	}
	wc.res = r
	if !wc.waits {
		return true, wc.notAcquired(nil)
	}
	return false, nil
}

// join queues the call behind the Client's other waiters for the lock.
func (wc *waitCall) join() error {
	if !wc.Join(wc.l.k.Channel) {
		return ErrClosed
	}
	return nil
}

// ready waits until the call's channel subscription is confirmed, or at most the backoff. It
// returns an error when the call ends meanwhile, as park does: the wait limit's timer fires once,
// so the call must end when this wait is the one that hears it.
func (wc *waitCall) ready(ctx context.Context) error {
	return wc.parked(ctx, wc.Ready(ctx))
}

// park waits for a release message or the fallback delay; it returns an error when the call ends
// (its context, its wait limit, the Client's Close).
func (wc *waitCall) park(ctx context.Context) error {
	d := wc.Backoff
	if wc.res.Epoch != 0 {
		// Queued in Redis for a fair lock: a release hands the lock over with a grant message
		// (internal/wait/grant.go); polls only keep the waiter's place and catch the holder's expiry.
		d = wc.MaxBack
	}
	if wc.res.Busy && wc.res.RetryAfter+time.Millisecond < d {
		// The holder's TTL runs out first (PTTL 0: within a millisecond): be there when it does.
		d = wc.res.RetryAfter + time.Millisecond
	}
	// Every fair waiter and every permit waiter polls within a third of its queue timeout: the poll
	// keeps its place in the Redis-side queue, which would drop it otherwise. A lock's waiters
	// behind the first local one poll rarely, so that many parked waiters cost Redis almost nothing.
	return wc.parked(ctx, wc.Park(ctx, d, !wc.Handoff))
}

// parked is the call's error after a Park that ended why: nil while it goes on.
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

// finish leaves the local queue and, for a fair call that did not get the lock, the Redis-side one.
func (wc *waitCall) finish(ctx context.Context, err error) {
	wc.Leave(err == nil) // (a grant not taken is handed on by the dequeue below)
	if err != nil && wc.Handoff && wc.waits && wc.attempts > 0 {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_, _ = wc.c.st.Release(dctx, store.ReleaseReq{Keys: &wc.l.k, Waiter: wc.l.req})
		cancel()
	}
}

func (wc *waitCall) notAcquired(cause error) error {
	e := &NotAcquiredError{Name: wc.l.k.Name, RetryAfter: wc.res.RetryAfter, Attempts: wc.attempts}
	if wc.waits {
		e.Waited = max(time.Since(wc.start), 1)
	}
	if cause != nil {
		return errors.Join(e, cause)
	}
	return e
}

// handoffStart prepares such a call: every waiting attempt queues it in Redis, so it polls often
// enough to stay queued (at least every third of its queue timeout); and if this Client subscribes
// the release channel already, it joins the local queue before its first attempt, so that a grant
// made right after that attempt finds it (otherwise it joins after a refused attempt, and tries
// again once subscribed).
func (wc *waitCall) handoffStart() error {
	wc.MaxBack = min(wc.MaxBack, wc.c.opt.waiterTTL/3)
	wc.Backoff = min(wc.Backoff, wc.MaxBack)
	if !wc.waits {
		return nil
	}
	wc.l.req.WaiterTTL = wc.c.opt.waiterTTL
	if wc.c.room.Subscribed(wc.l.k.Channel) {
		return wc.join()
	}
	return nil
}

// claim takes the lock or permit a release granted to the call while it waited (direct handoff):
// it reports done with the call's result, or not done (a stale grant, or none: the call goes on
// with an attempt). The lease is counted from when the call's last attempt was sent, before the
// grant was made. A fair grant's lease is the TTL but at most the queue timeout
// (WithFairWaiterTimeout, see lk_give in internal/script/lua/fair.lua), so that a waiter that died while queued
// does not keep the lock for a long TTL; the watchdog lengthens it to the TTL within a third of
// it. If the last attempt was sent more than half the lease ago, or the Client waits for replicas
// to acknowledge each acquisition (WithReplicaAck: the releasing script's write was not waited
// for), the call confirms with an attempt instead (which answers the grant with a full TTL).
func (wc *waitCall) claim(ctx context.Context) (bool, error) {
	if wc.W == nil || !wc.Handoff || ctx.Err() != nil {
		return false, nil // (cancelled: the call ends, and finish hands a grant on)
	}
	g := wc.c.room.TakeGrant(wc.W)
	lease := wc.l.ttl
	if !wc.l.kind.queued() {
		lease = min(lease, wc.l.req.WaiterTTL)
	}
	if !g.OK || g.Epoch != wc.epoch || time.Since(wc.sent) > lease/2 || wc.c.opt.replicas > 0 {
		return false, nil
	}
	if lease < wc.l.ttl {
		wc.l.lease = lease
	}
	wc.res = store.AcquireResult{OK: true, Fence: g.Fence, Holds: 1}
	return true, wc.c.outlived(ctx, wc.l, wc.sent)
}
