package chaos_test

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/core"
)

// The safety checker's semaphore workload (the "permits" variant): workers on several clients take
// permits (core.Permits) of a few names with small limits — on one name callers pass different
// limits — with mixed TTLs, fair or not, by Acquire, TryAcquire and Do; they hold a permit briefly
// or over several renewals, Extend it (longer, or shorter, then often against a renewal in flight),
// and Release it or close their client (which releases it) and replace it. A
// permit is never re-entered, so there are no re-entries and no WithOwner. The faults, the history
// and its records are the lock variants' (a hold with Limit > 0 is a permit).

// runPermits loops until the workload stops.
func (w *worker) runPermits() {
	for !w.stopped() {
		if w.provokePermit() {
			continue
		}
		switch r := w.rnd.IntN(1000); {
		case r < 3 && !w.skip["close"]:
			_ = w.slot.replace()
		case r < 200:
			w.permit("try")
		case r < 400 && !w.skip["do"]:
			w.permitDo()
		case r < 470 && !w.skip["maxhold"]:
			w.maxHold()
		case r < 570 && !w.skip["giveup"]:
			w.giveUpWaiting()
		default:
			w.permit("acquire")
		}
	}
}

// permitName draws a semaphore's name, the limit the caller passes and a TTL.
func (w *worker) permitName() (string, int, time.Duration) {
	name := w.names[w.rnd.IntN(len(w.names))]
	ls := w.limits[name]
	return name, ls[w.rnd.IntN(len(ls))], w.ttls[w.rnd.IntN(len(w.ttls))]
}

// permitOpts returns Permits(hd.Limit), and Fair when hd is fair.
func permitOpts(hd *hold) []core.AcquireOption {
	opts := []core.AcquireOption{core.Permits(hd.Limit)}
	if hd.Fair {
		opts = append(opts, core.Fair())
	}
	return opts
}

// permit takes a permit (Acquire or TryAcquire) and holds it.
func (w *worker) permit(kind string) {
	c, gen := w.slot.get()
	name, limit, ttl := w.permitName()
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: kind, TTL: ttl, Limit: limit,
		Fair: w.fair && w.rnd.IntN(4) == 0 && !w.skip["fair"]}
	opts := permitOpts(hd)
	if w.rnd.IntN(5) != 0 { // else: until the context ends
		opts = append(opts, core.WithWait(w.dur(50*time.Millisecond, time.Second)))
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	cctx, cl := w.newCall(ctx, hd)
	acquire := c.Acquire
	if kind == "try" {
		acquire = c.TryAcquire
	}
	l, err := acquire(cctx, name, ttl, opts...)
	if err != nil {
		w.failed(cl, l, err)
		return
	}
	cl.acquired(l)
	w.holdPermit(l, cl)
}

// holdPermit works under a held permit, then releases it (or closes the client): mostly briefly, sometimes (TTL up to 1s)
// for one to two TTLs, so that its renewals run; now and then it extends it (see extend: shorter
// ones often race a renewal in flight), more often while its replies are delayed.
func (w *worker) holdPermit(l *core.Lock, cl *call) {
	hd := cl.hold
	work := w.dur(0, min(hd.TTL/3, 300*time.Millisecond))
	if hd.TTL <= time.Second && w.rnd.IntN(4) == 0 {
		work = w.dur(hd.TTL, 2*hd.TTL)
	}
	w.holdPermitFor(l, cl, work)
}

// holdPermitFor is holdPermit with the work's length given. A permit that WithMaxHold ended is
// checked in Redis (see checkFreed) instead of released.
func (w *worker) holdPermitFor(l *core.Lock, cl *call, work time.Duration) {
	hd := cl.hold
	lctx := l.Context()
	end := time.Now().Add(work)
	for time.Now().Before(end) && lctx.Err() == nil && !w.stopped() {
		r := w.rnd.IntN(10)
		if !w.skip["extend"] && (r == 9 || r < 4 && w.h.faulted(w.slot.idx) == "latency") {
			w.extend(l, cl, false)
		}
		w.sleep(lctx, min(time.Until(end), w.dur(hd.TTL/10, hd.TTL/4)))
		cl.live(lctx)
	}
	if errors.Is(context.Cause(lctx), core.ErrMaxHold) {
		w.checkFreed(cl)
		return
	}
	if w.rnd.IntN(20) == 0 && !w.skip["close"] {
		_ = w.slot.replace() // Client.Close releases it (and the client's other permits)
		return
	}
	cl.live(lctx)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w.h.op()
	_ = l.Release(ctx)
}

// permitDo runs Do on a permit (see doWith: sometimes the release that follows the work loses its
// reply and is replayed).
func (w *worker) permitDo() {
	c, gen := w.slot.get()
	name, limit, ttl := w.permitName()
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: "do", TTL: ttl, Limit: limit,
		Fair: w.fair && w.rnd.IntN(4) == 0 && !w.skip["fair"]}
	w.doWith(c, hd, permitOpts(hd)...)
}

// provokePermit, while the worker's replies are delayed, sometimes tries a free permit with a
// caller deadline shorter than the delay (see giveUp): its lease must be gone from Redis soon after
// (oracle.orphans). It reports whether it did.
func (w *worker) provokePermit() bool {
	if w.slot.px == nil || w.skip["provoke"] || w.h.faulted(w.slot.idx) != "latency" || w.rnd.IntN(3) != 0 {
		return false
	}
	c, gen := w.slot.get()
	name := "pfree-" + strconv.Itoa(w.slot.idx) + "-" + strconv.Itoa(w.rnd.IntN(1000))
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: "try", TTL: 3 * time.Second, Limit: 1}
	ctx, cancel := context.WithTimeout(w.ctx, w.dur(5*time.Millisecond, 15*time.Millisecond))
	defer cancel()
	cctx, cl := w.newCall(ctx, hd)
	l, err := c.TryAcquire(cctx, name, hd.TTL, core.Permits(1))
	if err != nil {
		w.failed(cl, l, err)
		return true
	}
	cl.acquired(l)
	cl.live(l.Context())
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rcancel()
	w.h.op()
	_ = l.Release(rctx)
	return true
}
