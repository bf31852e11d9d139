package core

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Direct handoff (fair locks and semaphores): a waiter is queued in Redis by its acquire attempts,
// with what a grant needs (TTL, label, hold; a permit's limit). A release of the lock's last hold
// or of a permit (or a waiter that gives up holding a grant) gives the lock or the freed permit to
// the live waiter at the head of that queue inside the script, as the waiter's own acquisition
// would (fence, TTL, holder), and publishes "g:" SHA1(token) ":" fence ":" epoch. The waiter's
// Client wakes it with the grant, and it holds at once, without another round trip (claim).
//
// The epoch names the waiter's queueing: for a permit, the number of the acquire attempt that
// last registered it (each attempt records its own); for a fair lock, the server's clock in µs
// when the attempt that queued it ran (fair_lib.lua), which every later attempt of the waiter
// answers. Either way the grant was made after the waiter's last attempt ran: a grant made before
// it would have been answered by the attempt itself (an attempt by a token holding a live permit,
// or the lock with this hold, answers it, lengthened to a full TTL). So the waiter counts its
// lease from when it sent that attempt: its local deadline is never later than the lease in
// Redis. A grant for another epoch is stale (its lease was reclaimed or lost, and the waiter
// queued again since) and is ignored. A waiter that gives up dequeues itself, handing on a lock or
// permit it was granted meanwhile; a waiter that died leaves its grant to expire with its TTL,
// like a crashed holder.

// grantPrefix marks the release messages that grant a lock or a permit to a named waiter.
const grantPrefix = "g:"

// grant is a lock or permit a release granted to a waiter.
type grant struct {
	fence, epoch int64
	ok           bool
}

// parseGrant reads a grant message: the waiter's token digest, the fence and the epoch.
func parseGrant(payload string) (digest string, g grant) {
	rest, _ := strings.CutPrefix(payload, grantPrefix)
	digest, rest, ok1 := strings.Cut(rest, ":")
	f, e, ok2 := strings.Cut(rest, ":")
	fence, err1 := strconv.ParseInt(f, 10, 64)
	epoch, err2 := strconv.ParseInt(e, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || fence <= 0 {
		return "", grant{}
	}
	return digest, grant{fence: fence, epoch: epoch, ok: true}
}

// name records w under its digest, queued or not, so that a grant finds it while it makes an
// attempt too; the caller holds the queues' mutex.
func (q *waitQueue) name(w *waiter) {
	if w.digest == "" {
		return
	}
	if q.named == nil {
		q.named = make(map[string]*waiter)
	}
	q.named[w.digest] = w
}

// unname forgets w's digest; the caller holds the queues' mutex.
func (q *waitQueue) unname(w *waiter) {
	if w.digest != "" && q.named[w.digest] == w {
		delete(q.named, w.digest)
	}
}

// granted hands a grant message to the waiter it names, if it is this Client's, and wakes it; the
// caller holds the queues' mutex.
func (q *waitQueue) granted(payload string) {
	digest, g := parseGrant(payload)
	w := q.named[digest]
	if !g.ok || w == nil {
		return
	}
	w.grant = g
	if w.inQueue {
		q.remove(w)
	}
	signal(w.wake)
}

// subscribed reports whether this Client has ch subscribed already (confirmed by the server).
func (r *waitQueues) subscribed(ch string) bool {
	r.mu.Lock()
	q := r.queues[ch]
	ok := q != nil && q.confirmed
	r.mu.Unlock()
	return ok
}

// takeGrant returns and forgets the grant w received, if any; the wake-up that came with it is
// used up too (it must not pass to another waiter).
func (r *waitQueues) takeGrant(w *waiter) grant {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := w.grant
	w.grant = grant{}
	if g.ok {
		select {
		case <-w.wake:
		default:
		}
	}
	return g
}

// handoff reports whether the call's waiting attempts queue it in Redis, where a release may grant
// it the lock or a permit directly: a fair lock, a permit.
func (wc *waitCall) handoff() bool { return wc.ao.fair || wc.l.k.sem != nil }

// handoffStart prepares such a call: every waiting attempt queues it in Redis, so it polls often
// enough to stay queued (at least every third of its queue timeout); and if this Client subscribes
// the release channel already, it joins the local queue before its first attempt, so that a grant
// made right after that attempt finds it (otherwise it joins after a refused attempt, and tries
// again once subscribed).
func (wc *waitCall) handoffStart() error {
	wc.maxBack = min(wc.maxBack, wc.c.opt.waiterTTL/3)
	wc.backoff = min(wc.backoff, wc.maxBack)
	if !wc.wait {
		return nil
	}
	wc.l.req.waiterTTL = wc.c.opt.waiterTTL
	if wc.c.room.subscribed(wc.l.k.channel) {
		return wc.join()
	}
	return nil
}

// claim takes the lock or permit a release granted to the call while it waited (direct handoff):
// it reports done with the call's result, or not done (a stale grant, or none: the call goes on
// with an attempt). The lease is counted from when the call's last attempt was sent, before the
// grant was made. A fair grant's lease is the TTL but at most the queue timeout
// (WithFairWaiterTimeout, see fq_give in fair_lib.lua), so that a waiter that died while queued
// does not keep the lock for a long TTL; the watchdog lengthens it to the TTL within a third of
// it. If the last attempt was sent more than half the lease ago, or the Client waits for replicas
// to acknowledge each acquisition (WithReplicaAck: the releasing script's write was not waited
// for), the call confirms with an attempt instead (which answers the grant with a full TTL).
func (wc *waitCall) claim(ctx context.Context) (bool, error) {
	if wc.w == nil || !wc.handoff() || ctx.Err() != nil {
		return false, nil // (cancelled: the call ends, and finish hands a grant on)
	}
	g := wc.c.room.takeGrant(wc.w)
	lease := wc.l.ttl
	if wc.l.k.sem == nil {
		lease = min(lease, wc.l.req.waiterTTL)
	}
	if !g.ok || g.epoch != wc.epoch || time.Since(wc.sent) > lease/2 || wc.c.opt.replicas > 0 {
		return false, nil
	}
	if lease < wc.l.ttl {
		wc.l.lease = lease
	}
	wc.res = acquireResult{ok: true, fence: g.fence, holds: 1}
	return true, wc.c.outlived(ctx, wc.l, wc.sent)
}
