package chaos_test

import (
	"context"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/core"
)

// Operations that provoke the rare situations faults open, so that a bounded run meets them
// often: a caller that gives up on an acquisition whose reply is delayed, an Extend that races a
// renewal whose reply is delayed, and a release whose reply is lost (go-redis replays it) while
// other owners take and release the lock. Both need a path to
// one Redis node (slot.px); over Redlock they are skipped.

// provoke runs a provoking operation when the worker's path suits one; it reports whether it did.
func (w *worker) provoke() bool {
	if w.slot.px == nil || w.skip["provoke"] || w.h.faulted(w.slot.idx) != "latency" || w.rnd.IntN(2) == 0 {
		return false
	}
	if w.rnd.IntN(3) == 0 {
		w.giveUp()
	} else {
		w.raceExtend()
	}
	return true
}

// raceExtend takes a contended name and, while replies are delayed, shortens it with Extend right
// when a renewal is in flight: the renewal's late answer must not lengthen the lock's validity
// past the shorter TTL Redis now holds, or a waiter gets the lock while this holder is live.
func (w *worker) raceExtend() {
	c, gen := w.slot.get()
	name := w.names[w.rnd.IntN(len(w.names))]
	ttl := [...]time.Duration{300 * time.Millisecond, 500 * time.Millisecond, time.Second}[w.rnd.IntN(3)]
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: "try", TTL: ttl}
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	cctx, cl := w.newCall(ctx, hd)
	l, err := c.Acquire(cctx, name, ttl, core.WithWait(300*time.Millisecond))
	if err != nil {
		w.failed(cl, l, err)
		return
	}
	cl.acquired(l)
	w.extend(l, cl, false)
	w.sleep(l.Context(), ttl/2)
	cl.live(l.Context())
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rcancel()
	w.h.op()
	_ = l.Release(rctx)
}

// giveUp tries a free lock (a name only this worker uses) with a caller deadline shorter than the
// delayed reply: the script runs, the caller gives up before the answer. Its token must be gone
// from Redis soon after (see oracle.orphans).
func (w *worker) giveUp() {
	c, gen := w.slot.get()
	name := "free-" + strconv.Itoa(w.slot.idx) + "-" + strconv.Itoa(w.rnd.IntN(1000))
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: "try", TTL: 3 * time.Second}
	ctx, cancel := context.WithTimeout(w.ctx, w.dur(5*time.Millisecond, 15*time.Millisecond))
	defer cancel()
	cctx, cl := w.newCall(ctx, hd)
	l, err := c.TryAcquire(cctx, name, hd.TTL)
	if err != nil {
		w.failed(cl, l, err)
		return
	}
	cl.acquired(l)
	cl.live(l.Context())
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rcancel()
	w.h.op()
	_ = l.Release(rctx)
}

// loseReplies makes the worker's path lose replies for a few tens of milliseconds, starting now.
func (w *worker) loseReplies() {
	if w.slot.px == nil || w.skip["replyloss"] || w.skip["provoke"] {
		return
	}
	if !w.h.claim(w.slot.idx, "replyloss") {
		return
	}
	s := span{Kind: "replyloss", Target: w.slot.idx, From: w.h.now(), Detail: "provoked"}
	if err := w.slot.px.ReplyLoss(5 * time.Millisecond); err != nil {
		w.h.claim(w.slot.idx, "")
		return
	}
	w.pending.Add(1)
	time.AfterFunc(w.dur(30*time.Millisecond, 120*time.Millisecond), func() {
		defer w.pending.Done()
		w.slot.px.Clear()
		w.h.claim(w.slot.idx, "")
		s.To = w.h.now()
		w.h.addFault(s)
	})
}
