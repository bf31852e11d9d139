package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockkit/lockkit/core"
)

// The read-write variant's workload: workers take the read side (three times in four) or the
// write side of a few read-write locks, with mixed TTLs, by Acquire (waiting up to a second, or
// until their context ends), TryAcquire and Do. Under a hold they nest reads (and, under a write,
// writes) through the hold's context, now and then try a write through a read hold's context (an
// upgrade: it must be refused with ErrInvalid at once), Extend the hold, then Release it or close
// their client. A hold is recorded with Limit 1 for a write and core.MaxPermits for a read, so the
// semaphore checks apply; a nested hold gets its outer hold's Limit (it shares its acquisition).
// The mixed variant's workers also take sets of both names (worker.set) and re-enter their locks
// through the lock's context (worker.reenter).

// rwWorker is a worker of the read-write variant.
type rwWorker struct {
	*worker
	rw *rwWorkload
}

// run loops until the workload stops.
func (w *rwWorker) run() {
	for !w.stopped() {
		if w.provokeRW() {
			continue
		}
		switch r := w.rnd.IntN(1000); {
		case r < 3 && !w.skip["close"]:
			_ = w.slot.replace()
		case r < 200:
			w.take("try")
		case r < 400 && !w.skip["do"]:
			w.do()
		case r < 520 && w.rw.mixed && !w.skip["set"]:
			w.set() // both names' exclusive side (recorded as locks: see mixedRun)
		default:
			w.take("acquire")
		}
	}
}

// side draws a side: a write one time in four. In the mixed variant it draws a kind of hold
// instead: a write, a read, a lock (fair or not) or a permit (limit 2 or 3), each recorded with its
// Mode and the limit the semaphore checks apply to (1 for a lock or a write).
func (w *rwWorker) side() (write bool, limit int, mode string, opts []core.AcquireOption) {
	if w.rw.mixed {
		switch r := w.rnd.IntN(10); {
		case r < 2:
			return true, 1, "write", []core.AcquireOption{core.Write()}
		case r < 5:
			return false, core.MaxPermits, "read", []core.AcquireOption{core.Read()}
		case r < 6:
			return false, 1, "lock", []core.AcquireOption{core.Fair()}
		case r < 8:
			return false, 1, "lock", nil
		default:
			n := 2 + w.rnd.IntN(2)
			return false, n, "permit", []core.AcquireOption{core.Permits(n)}
		}
	}
	if w.rnd.IntN(4) == 0 {
		return true, 1, "", []core.AcquireOption{core.Write()}
	}
	return false, core.MaxPermits, "", []core.AcquireOption{core.Read()}
}

// rwSide reports whether hd is a read or a write (nesting and upgrades apply to those only).
func rwSide(hd *hold) bool { return hd.Mode == "" || hd.Mode == "read" || hd.Mode == "write" }

// take acquires a side (Acquire or TryAcquire) and holds it.
func (w *rwWorker) take(kind string) {
	c, gen := w.slot.get()
	name, ttl := w.names[w.rnd.IntN(len(w.names))], w.ttls[w.rnd.IntN(len(w.ttls))]
	write, limit, mode, side := w.side()
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: kind, TTL: ttl, Limit: limit, Mode: mode}
	opts := side
	if w.rnd.IntN(5) != 0 { // else: until the context ends
		opts = append(opts, core.WithWait(w.dur(50*time.Millisecond, time.Second)))
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	cctx, cl := w.h.newCall(ctx, hd)
	acquire := c.Acquire
	if kind == "try" {
		acquire = c.TryAcquire
	}
	l, err := acquire(cctx, name, ttl, opts...)
	if write && kind != "try" && !w.rw.mixed { // (between kinds the order is not FIFO: no starvation bound)
		w.wrote(hd.Client, name, hd.Call, w.h.now(), err)
	}
	if err != nil {
		w.failed(cl, l, err)
		return
	}
	cl.acquired(l)
	w.holdRW(c, l, cl)
}

// wrote records a waiting write call for the starvation check: its start, and when it returned
// (was granted, or gave up).
func (w *rwWorker) wrote(client int, name string, call, ret time.Duration, err error) {
	wc := writeCall{client: client, name: name, call: call, ret: ret, granted: err == nil}
	if err != nil {
		wc.err = err.Error()
	}
	w.rw.mu.Lock()
	w.rw.writes = append(w.rw.writes, wc)
	w.rw.mu.Unlock()
}

// holdRW works under a hold, nesting holds in it and extending it, then releases it (or closes
// the client, which releases it): mostly briefly, sometimes (TTL up to 1s) for one to two TTLs,
// so that its renewals run.
func (w *rwWorker) holdRW(c *core.Client, l *core.Lock, cl *call) {
	hd := cl.hold
	lctx := l.Context()
	work := w.dur(0, min(hd.TTL/3, 300*time.Millisecond))
	long := hd.TTL <= time.Second && w.rnd.IntN(4) == 0
	if long {
		work = w.dur(hd.TTL, 2*hd.TTL)
	}
	end := time.Now().Add(work)
	for time.Now().Before(end) && lctx.Err() == nil && !w.stopped() {
		switch r := w.rnd.IntN(10); {
		case r < 3 && rwSide(hd) && !w.skip["ctx"]:
			w.nest(c, l, hd)
		case r < 3 && hd.Mode == "lock" && !w.skip["ctx"]:
			w.reenter(l, hd, false) // (the lock variants' re-entry through the lock's context)
		case r == 3 && hd.Limit == core.MaxPermits && !w.skip["ctx"]:
			w.upgrade(c, l, hd)
		case r < 4 && w.rw.mixed && !w.skip["ctx"]:
			w.selfExcluded(c, l, hd)
		case (r == 9 || r > 5 && w.h.faulted(w.slot.idx) == "latency") && !w.skip["extend"]:
			w.extend(l, cl, false)
		}
		w.sleep(lctx, min(time.Until(end), w.dur(hd.TTL/10, hd.TTL/4)))
		cl.live(lctx)
	}
	if w.rnd.IntN(20) == 0 && !w.skip["close"] {
		_ = w.slot.replace() // Client.Close releases it (and the client's other holds)
		return
	}
	cl.live(lctx)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w.h.op()
	_ = l.Release(ctx)
}

// nest takes a hold nested in outer (a read, or under a write a write too) through its context,
// with its own TTL, sometimes a WithMaxHold shorter than the work, holds it briefly and releases
// it — or leaves it to end with the outer hold.
func (w *rwWorker) nest(c *core.Client, outer *core.Lock, ohd *hold) {
	side, mode := core.Read(), "read"
	if ohd.Limit == 1 && w.rnd.IntN(2) == 0 {
		side, mode = core.Write(), "write"
	}
	opts := []core.AcquireOption{side}
	ttl := w.dur(max(ohd.TTL/20, 20*time.Millisecond), ohd.TTL)
	work := w.dur(0, ohd.TTL/4)
	hd := &hold{Client: w.slot.idx, Gen: ohd.Gen, Name: ohd.Name, Kind: "ctx", TTL: ttl, Limit: ohd.Limit, Outer: ohd.ID}
	if w.rw.mixed {
		hd.Mode = mode // (its family, for the key losses: see family)
	}
	if w.rnd.IntN(8) == 0 {
		hd.MaxHold = work/2 + time.Millisecond // (recorded: the oracle checks it ended by this limit)
		opts = append(opts, core.WithMaxHold(hd.MaxHold))
	}
	cctx, cl := w.h.newCall(outer.Context(), hd)
	in, err := c.Acquire(cctx, ohd.Name, ttl, opts...)
	if err != nil {
		return
	}
	cl.acquired(in)
	w.sleep(in.Context(), work)
	cl.live(in.Context())
	if w.rnd.IntN(6) == 0 {
		return // ends with the outer hold
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	w.h.op()
	_ = in.Release(ctx)
}

// upgrade tries a write through a read hold's context: it must fail with ErrInvalid (a waiting
// upgrade would wait for its own read); anything else is recorded for the oracle ("upgrade").
func (w *rwWorker) upgrade(c *core.Client, outer *core.Lock, ohd *hold) {
	ctx, cancel := context.WithTimeout(outer.Context(), time.Second)
	defer cancel()
	start := w.h.now()
	w.h.op()
	l, err := c.Acquire(ctx, ohd.Name, ohd.TTL, core.Write())
	if errors.Is(err, core.ErrInvalid) || errors.Is(err, core.ErrClosed) { // (closed: another worker replaced the client)
		return
	}
	if l != nil {
		_ = l.Release(context.Background())
	}
	w.rw.mu.Lock()
	w.rw.upgrades = append(w.rw.upgrades, verdict{Prop: "upgrade", At: start, Holds: []int{ohd.ID}, Msg: fmt.Sprintf(
		"%s: a write through read hold %d's context returned %v, want ErrInvalid", ohd.Name, ohd.ID, err)})
	w.rw.mu.Unlock()
}

// do runs Do on a side (see doWith).
func (w *rwWorker) do() {
	c, gen := w.slot.get()
	name, ttl := w.names[w.rnd.IntN(len(w.names))], w.ttls[w.rnd.IntN(len(w.ttls))]
	write, limit, mode, side := w.side()
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: "do", TTL: ttl, Limit: limit, Mode: mode}
	w.doWith(c, hd, side...)
	if write && !w.rw.mixed {
		call, ret := hd.Call, hd.Ret // (doWith returned: the call's record is complete but for its end)
		var err error
		if ret == 0 {
			ret, err = w.h.now(), errors.New("not granted")
		}
		w.wrote(hd.Client, name, call, ret, err)
	}
}

// provokeRW, while the worker's replies are delayed, sometimes tries a free read-write lock with
// a caller deadline shorter than the delay: its lease must be gone from Redis soon after (the
// leases check's orphans).
func (w *rwWorker) provokeRW() bool {
	if w.skip["provoke"] || w.h.faulted(w.slot.idx) != "latency" || w.rnd.IntN(3) != 0 {
		return false
	}
	c, gen := w.slot.get()
	name := rwFree // (watched: see watchRW)
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: "try", TTL: 3 * time.Second, Limit: 1}
	ctx, cancel := context.WithTimeout(w.ctx, w.dur(5*time.Millisecond, 15*time.Millisecond))
	defer cancel()
	cctx, cl := w.h.newCall(ctx, hd)
	l, err := c.TryAcquire(cctx, name, hd.TTL, core.Write())
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

// selfExcluded (the mixed variant) tries, through the context of hold ohd, a kind of hold of the
// same name that can neither share with it nor nest in it (a read or a permit under a lock, a lock
// or a permit under a read or a write, a lock or a read under a permit): it must fail with
// ErrInvalid at once (it would wait for its own hold); anything else is recorded for the oracle.
func (w *rwWorker) selfExcluded(c *core.Client, outer *core.Lock, ohd *hold) {
	var opts []core.AcquireOption
	switch ohd.Mode {
	case "lock":
		opts = []core.AcquireOption{core.Permits(2)}
	case "permit":
		opts = []core.AcquireOption{core.Read()}
	default: // a read or a write: a lock
	}
	ctx, cancel := context.WithTimeout(outer.Context(), time.Second)
	defer cancel()
	start := w.h.now()
	w.h.op()
	l, err := c.Acquire(ctx, ohd.Name, ohd.TTL, opts...)
	if errors.Is(err, core.ErrInvalid) || errors.Is(err, core.ErrClosed) { // (as in upgrade)
		return
	}
	if l != nil {
		_ = l.Release(context.Background())
	}
	w.rw.mu.Lock()
	w.rw.upgrades = append(w.rw.upgrades, verdict{Prop: "self-exclusion", At: start, Holds: []int{ohd.ID}, Msg: fmt.Sprintf(
		"%s: a hold of another kind through %s hold %d's context returned %v, want ErrInvalid", ohd.Name, ohd.Mode, ohd.ID, err)})
	w.rw.mu.Unlock()
}
