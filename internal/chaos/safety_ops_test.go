package chaos_test

import (
	"context"
	"errors"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
)

// The safety checker's operations on the hold's lifetime (issue #27): holds ended by WithMaxHold
// (and by a Client's WithDefaultMaxHold), waiters that give up while queued (a lock's fair queue, a
// semaphore's queue with direct handoff), and the gate that keeps re-entries away from key losses
// when LOCKKIT_SAFETY_SKIP=lossreentry asks for it. The operator's ForceRelease and the key losses
// are in safety_loss_test.go.

// defaultQueueTimeout is core's WithFairWaiterTimeout default.
const defaultQueueTimeout = 5 * time.Second

// newCall starts the record of an acquire call by this worker's client: a hold without its own
// WithMaxHold gets its Client's WithDefaultMaxHold, a fair one its Client's queue timeout.
func (w *worker) newCall(ctx context.Context, hd *hold) (context.Context, *call) {
	if hd.MaxHold == 0 {
		hd.MaxHold = w.slot.maxHold
	}
	if hd.Fair {
		hd.Queue = cmpOr(w.slot.queue, defaultQueueTimeout)
	}
	return w.h.newCall(ctx, hd)
}

func cmpOr(d, or time.Duration) time.Duration {
	if d == 0 {
		return or
	}
	return d
}

// maxHold takes a lock (or, in the semaphore variant, a permit) with WithMaxHold and mostly works
// past the limit — re-entering it, extending it — so that the watchdog ends the hold: its context
// must end by the limit (cause ErrMaxHold) and the lock be given back at once (see checkFreed and
// oracle.maxHolds). A third of them run Do instead.
func (w *worker) maxHold() {
	c, gen := w.slot.get()
	name, ttl := w.names[w.rnd.IntN(len(w.names))], w.ttls[w.rnd.IntN(len(w.ttls))]
	limit := 0
	if w.limits != nil {
		ls := w.limits[name]
		limit = ls[w.rnd.IntN(len(ls))]
	}
	maxHold := w.dur(30*time.Millisecond, min(2*ttl, 2*time.Second))
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: "acquire", TTL: ttl, Limit: limit, MaxHold: maxHold,
		Fair: w.fair && (w.allFair || w.rnd.IntN(4) == 0) && !w.skip["fair"]}
	opts := []core.AcquireOption{core.WithMaxHold(maxHold)}
	if limit > 0 {
		opts = append(opts, core.Permits(limit))
	}
	if hd.Fair {
		opts = append(opts, core.Fair())
	}
	w.h.count("maxhold")
	if w.rnd.IntN(3) == 0 && !w.skip["do"] {
		hd.Kind = "do"
		w.doWith(c, hd, opts...)
		return
	}
	opts = append(opts, core.WithWait(w.dur(50*time.Millisecond, time.Second)))
	ctx, cancel := w.callCtx()
	defer cancel()
	cctx, cl := w.newCall(ctx, hd)
	l, err := c.Acquire(cctx, name, ttl, opts...)
	if err != nil {
		w.failed(cl, l, err)
		return
	}
	cl.acquired(l)
	work := maxHold + w.dur(0, ttl)
	if w.rnd.IntN(4) == 0 {
		work = w.dur(0, maxHold) // done in time
	}
	if limit > 0 {
		w.holdPermitFor(l, cl, work)
		return
	}
	w.holdFor(l, cl, false, work, w.rnd.IntN(2) == 0)
}

// checkFreed follows a hold that WithMaxHold ended: it reads Redis directly (not through the
// client's proxy) every 15 ms until its token no longer holds the lock (or its permit), for at
// most 600 ms, recording the last time it still did (HeldSeen) and the first time it did not
// (Freed). The oracle requires the release soon after the end when the client's path was healthy.
func (w *worker) checkFreed(cl *call) {
	cl.mu.Lock()
	name, tok, permit := cl.hold.Name, cl.hold.Tok, cl.hold.Limit > 0
	cl.mu.Unlock()
	w.h.count("maxhold-ended")
	deadline := time.Now().Add(600 * time.Millisecond)
	for {
		at := w.h.now() // before the read: a token seen holding held at least until then
		held, err := w.tokenHeld(name, tok, permit)
		if err == nil {
			cl.mu.Lock()
			if held {
				cl.hold.HeldSeen = max(cl.hold.HeldSeen, at)
			} else if cl.hold.Freed == 0 {
				cl.hold.Freed = w.h.now()
			}
			cl.mu.Unlock()
			if !held {
				return
			}
		}
		if time.Now().After(deadline) || w.stopped() {
			return
		}
		time.Sleep(15 * time.Millisecond)
	}
}

// tokenHeld reports whether tok holds the lock name (a permit of the semaphore name) on any node.
func (w *worker) tokenHeld(name, tok string, permit bool) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, rdb := range w.admins {
		if permit {
			if permitHeld(ctx, rdb, name, tok) {
				return true, nil
			}
			continue
		}
		v, err := rdb.Get(ctx, locktest.Key(name)).Result()
		if err != nil && !isNil(err) {
			return false, err
		}
		if ownedBy(v, tok) {
			return true, nil
		}
	}
	return false, nil
}

// giveUpWaiting waits for a name that is held now (so that it queues: in fair mode in the lock's
// queue, and always in a semaphore's) and gives up after 5 to 400 ms, by a deadline or a
// cancellation. A release may have handed it the lock (a permit) meanwhile: it must pass it on
// (oracle.orphans), and if the call returns the lock, it is held as any other.
func (w *worker) giveUpWaiting() {
	c, gen := w.slot.get()
	name := w.names[w.rnd.IntN(len(w.names))]
	if held := w.h.heldNames(w.names); len(held) > 0 && w.rnd.IntN(4) != 0 {
		name = held[w.rnd.IntN(len(held))]
	}
	ttl := w.ttls[w.rnd.IntN(len(w.ttls))]
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: "giveup", TTL: ttl,
		Fair: w.fair && (w.allFair || w.rnd.IntN(2) == 0) && !w.skip["fair"]}
	var opts []core.AcquireOption
	if w.limits != nil {
		ls := w.limits[name]
		hd.Limit = ls[w.rnd.IntN(len(ls))]
		opts = append(opts, core.Permits(hd.Limit))
	}
	if hd.Fair {
		opts = append(opts, core.Fair())
	}
	after := w.dur(5*time.Millisecond, 400*time.Millisecond)
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	if w.rnd.IntN(2) == 0 {
		ctx, cancel = context.WithTimeout(ctx, after)
		defer cancel()
	} else {
		t := time.AfterFunc(after, cancel)
		defer t.Stop()
	}
	w.h.count("giveup")
	cctx, cl := w.newCall(ctx, hd)
	l, err := c.Acquire(cctx, name, ttl, opts...)
	if err != nil {
		w.failed(cl, l, err)
		return
	}
	w.h.count("giveup-acquired")
	cl.acquired(l)
	work := w.dur(0, min(ttl/3, 300*time.Millisecond))
	if hd.Limit > 0 {
		w.holdPermitFor(l, cl, work)
		return
	}
	w.holdFor(l, cl, false, work, false)
}

// withToken acquires, with WithToken, a name under the token of a hold another client holds (or
// held: the registry may be a moment behind): if that acquisition is still there the call re-enters
// it (holds > 1, its fence); if it is gone — released, expired, force-released, its key lost — the
// call takes the lock afresh under that token, and a hold of the earlier acquisition must not be
// kept alive by the new one (oracle.lossLate). It holds briefly and releases.
func (w *worker) withToken() {
	s, ok := w.reg.pick(w.rnd, w.slot.idx)
	if !ok {
		w.fresh("acquire")
		return
	}
	c, gen := w.slot.get()
	ttl := w.ttls[w.rnd.IntN(len(w.ttls))]
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: s.name, Kind: "token", TTL: ttl}
	if !w.lossGate(s.name, s.call) {
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	w.h.count("token")
	cctx, cl := w.newCall(ctx, hd)
	l, err := c.Acquire(cctx, s.name, ttl, core.WithToken(s.tok), core.WithWait(w.dur(20*time.Millisecond, 300*time.Millisecond)))
	w.lossGateDone()
	if err != nil {
		return // (not a failed acquisition for oracle.orphans: the token's owner may hold the lock)
	}
	if l.Holds() == 1 {
		w.h.count("token-fresh")
	}
	cl.acquired(l)
	w.holdFor(l, cl, false, w.dur(0, min(ttl/3, 200*time.Millisecond)), false)
}

// lossGate, when the gate is on (LOCKKIT_SAFETY_SKIP=lossreentry), holds it for reading and
// reports whether a re-entry of a hold of name whose acquire call began at since may go ahead:
// not if a key loss of name (or of every name) came since. The caller calls lossGateDone as soon as
// its acquire call returned (never holding the gate over anything that may take it again). With the
// gate, no key loss happens while a re-entry is in flight, so no re-entry meets a lock whose
// acquisition was lost: the run then checks everything else.
func (w *worker) lossGate(name string, since time.Duration) bool {
	if w.gate == nil {
		return true
	}
	w.gate.RLock()
	if w.h.lostSince(name, since) {
		w.gate.RUnlock()
		w.h.count("reentry-skipped")
		return false
	}
	return true
}

func (w *worker) lossGateDone() {
	if w.gate != nil {
		w.gate.RUnlock()
	}
}

func isNil(err error) bool { return errors.Is(err, redis.Nil) }
