package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// The safety checker's workload: workers on several clients take a few names with mixed TTLs, hold
// them for a short or a long time, re-enter them through the lock's context and through WithOwner
// from other clients, extend them (longer, and shorter when no other client shares the token), run
// Do, and close and replace their client now and then. Each worker draws its choices from its own
// PCG stream of the run's seed.

// shared is a held lock that other clients may re-enter with WithOwner.
type shared struct {
	id, client int
	name, tok  string
	ttl        time.Duration
	call       time.Duration // when the hold's acquire call began (see lossGate)
}

// registry lists the shared locks held now.
type registry struct {
	mu   sync.Mutex
	live []shared
}

func (r *registry) add(s shared) { r.mu.Lock(); r.live = append(r.live, s); r.mu.Unlock() }

func (r *registry) remove(id int) {
	r.mu.Lock()
	r.live = slices.DeleteFunc(r.live, func(s shared) bool { return s.id == id })
	r.mu.Unlock()
}

// pick returns a shared lock held by another client than notClient.
func (r *registry) pick(rnd *rand.Rand, notClient int) (shared, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var c []shared
	for _, s := range r.live {
		if s.client != notClient {
			c = append(c, s)
		}
	}
	if len(c) == 0 {
		return shared{}, false
	}
	return c[rnd.IntN(len(c))], true
}

// workload is what the workers share.
type workload struct {
	h      *history
	names  []string
	ttls   []time.Duration
	fair   bool             // Fair may be used (not over Redlock)
	limits map[string][]int // the semaphore scenario: the limits callers pass, by name (nil: locks)
	reg    registry
	ctx    context.Context // cancelled when the workload stops
	stop   chan struct{}
	// skip lists what LOCKKIT_SAFETY_SKIP leaves out: operations (ctx owner extend do close fair
	// nil provoke maxhold defaultmaxhold giveup token force), faults (latency replyloss reset pause del
	// flushall restart, or keyloss for the last three), and lossreentry: no re-entry of a hold
	// after a key loss of its name (see lossGate).
	skip    map[string]bool
	pending sync.WaitGroup  // faults the workers injected and have not healed yet
	allFair bool            // every acquisition is Fair (the fair variant)
	sets    bool            // workers also take sets of names (AcquireAll; safety_sets_test.go)
	admins  []*redis.Client // direct connections to every node (not through a proxy), to read Redis
	// gate, when set (LOCKKIT_SAFETY_SKIP=lossreentry), keeps re-entries and key losses apart:
	// a re-entry holds it for reading and is skipped after a loss of its name (see lossGate).
	gate *sync.RWMutex
}

type worker struct {
	*workload
	rnd  *rand.Rand
	slot *slot
}

// run loops until the workload stops.
func (w *worker) run() {
	for !w.stopped() {
		if w.provoke() {
			continue
		}
		switch r := w.rnd.IntN(1000); {
		case r < 3 && !w.skip["close"]:
			_ = w.slot.replace()
		case r < 150:
			w.fresh("try")
		case r < 350 && !w.skip["do"]:
			w.do()
		case r < 550 && !w.skip["owner"]:
			w.owner()
		case r < 620 && !w.skip["maxhold"]:
			w.maxHold()
		case r < 670 && !w.skip["giveup"]:
			w.giveUpWaiting()
		case r < 730 && !w.skip["token"]:
			w.withToken()
		case r < 830 && w.sets && !w.skip["set"]:
			w.set()
		default:
			w.fresh("acquire")
		}
	}
}

func (w *worker) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// sleep waits d, or until ctx ends or the workload stops.
func (w *worker) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-w.stop:
	}
}

// dur returns a random duration in [lo, hi], whole milliseconds (Redis counts TTLs in ms).
func (w *worker) dur(lo, hi time.Duration) time.Duration {
	lo, hi = lo.Truncate(time.Millisecond), hi.Truncate(time.Millisecond)
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rnd.Int64N(int64((hi-lo)/time.Millisecond)+1))*time.Millisecond
}

func (w *worker) callCtx() (context.Context, context.CancelFunc) {
	n := 4
	if w.h.faulted(w.slot.idx) == "latency" {
		n = 2
	}
	if w.rnd.IntN(n) == 0 { // a caller that gives up soon: its reply may come after it left
		return context.WithTimeout(w.ctx, w.dur(20*time.Millisecond, 300*time.Millisecond))
	}
	return context.WithTimeout(w.ctx, 10*time.Second)
}

// fresh acquires a name with a new token (Acquire or TryAcquire) and holds it.
func (w *worker) fresh(kind string) {
	c, gen := w.slot.get()
	name, ttl := w.names[w.rnd.IntN(len(w.names))], w.ttls[w.rnd.IntN(len(w.ttls))]
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: kind, TTL: ttl, Fair: w.fair && (w.allFair || w.rnd.IntN(4) == 0) && !w.skip["fair"]}
	var opts []core.AcquireOption
	if hd.Fair {
		opts = append(opts, core.Fair())
	}
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
	w.hold(l, cl, w.rnd.IntN(2) == 0)
}

// failed records a failed acquisition of a fresh token, and sometimes calls the methods of the nil
// lock it returned, as `defer l.Release(ctx)` before checking the error does.
func (w *worker) failed(cl *call, l *core.Lock, err error) {
	if w.rnd.IntN(3) == 0 && !w.skip["nil"] {
		nilLock(w.h, l)
	}
	cl.mu.Lock()
	tok := cl.tok
	cl.mu.Unlock()
	// A wait that ran out between attempts had nothing in flight; a context that ended may have
	// cut an attempt short, after its script ran.
	inFlight := !errors.Is(err, core.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	if tok != "" && inFlight {
		hd := cl.hold
		w.h.mu.Lock()
		w.h.fails = append(w.h.fails, &failed{Client: hd.Client, Name: hd.Name, Tok: tok, TTL: hd.TTL, Call: hd.Call, Ret: w.h.now(), Err: err.Error(), Limit: hd.Limit})
		w.h.mu.Unlock()
	}
	if !errors.Is(err, core.ErrNotAcquired) {
		w.sleep(context.Background(), w.dur(5*time.Millisecond, 50*time.Millisecond)) // back off while Redis is unreachable
	}
}

// nilLock calls Release, Extend and TTL on a failed acquisition's lock, recording panics.
func nilLock(h *history, l *core.Lock) {
	if l != nil {
		return
	}
	ctx := context.Background()
	for name, f := range map[string]func() error{
		"Release": func() error { return l.Release(ctx) },
		"Extend":  func() error { return l.Extend(ctx, time.Second) },
		"TTL":     func() error { _, err := l.TTL(ctx); return err },
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					h.panicked(fmt.Sprintf("(*core.Lock)(nil).%s panicked (a failed acquisition returns a nil *Lock): %v", name, p))
				}
			}()
			_ = f()
		}()
	}
}

// hold works under a held lock, then releases it. Mostly briefly; sometimes (TTL up to 1s) for one to two TTLs,
// re-entering it through its context every eighth to quarter of its TTL. A shared lock is offered to
// other clients for WithOwner re-entries and only ever extended longer.
func (w *worker) hold(l *core.Lock, cl *call, share bool) {
	hd := cl.hold
	work := w.dur(0, min(hd.TTL/3, 300*time.Millisecond))
	long := hd.TTL <= time.Second && w.rnd.IntN(4) == 0
	if long {
		work = w.dur(hd.TTL, 2*hd.TTL)
	}
	w.holdFor(l, cl, share, work, long)
}

// holdFor is hold with the work's length given: long holds re-enter at every step. A hold that
// WithMaxHold ended is checked in Redis (see checkFreed) instead of released.
func (w *worker) holdFor(l *core.Lock, cl *call, share bool, work time.Duration, long bool) {
	hd := cl.hold
	lctx := l.Context()
	if share {
		w.reg.add(shared{id: hd.ID, client: hd.Client, name: hd.Name, tok: hd.Tok, ttl: hd.TTL, call: hd.Call})
	}
	defer w.reg.remove(hd.ID)
	end := time.Now().Add(work)
	for time.Now().Before(end) && lctx.Err() == nil && !w.stopped() {
		r := w.rnd.IntN(10)
		switch {
		case (r < 4 || long) && !w.skip["ctx"]:
			w.reenter(l, hd, long)
		case r == 9 && !w.skip["extend"]:
			w.extend(l, cl, share)
		}
		if (long && r == 0 || r < 5 && w.h.faulted(w.slot.idx) == "latency") && !share && !w.skip["extend"] {
			w.extend(l, cl, share) // shorter, against a renewal whose reply is on its way
		}
		step := w.dur(hd.TTL/5, hd.TTL/3)
		if long {
			step = w.dur(hd.TTL/10, hd.TTL/5)
		}
		w.sleep(lctx, min(time.Until(end), step))
		cl.live(lctx)
	}
	w.reg.remove(hd.ID)
	if errors.Is(context.Cause(lctx), core.ErrMaxHold) {
		w.checkFreed(cl)
		return
	}
	if w.rnd.IntN(20) == 0 {
		return // left to Client.Close (or its loss)
	}
	cl.live(lctx)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w.h.op()
	_ = l.Release(ctx)
}

// extend extends l: longer, or (a lock no other client shares) shorter, then often right when a
// renewal of the lock is in flight, so that the two race.
func (w *worker) extend(l *core.Lock, cl *call, share bool) {
	hd := cl.hold
	ttl := w.dur(hd.TTL, 2*hd.TTL)
	if delayed := w.h.faulted(w.slot.idx) == "latency"; !share && (delayed || w.rnd.IntN(2) == 0) {
		ttl = w.dur(max(hd.TTL/20, 20*time.Millisecond), max(hd.TTL/4, 20*time.Millisecond))
		if delayed || w.rnd.IntN(2) == 0 {
			for wait := time.Now().Add(hd.TTL / 3); time.Now().Before(wait) && !w.h.inFlight(hd.Tok); {
				time.Sleep(time.Millisecond) // poll for a renewal in flight: a race, not a synchronisation
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	at := w.h.now()
	w.h.op()
	err := l.Extend(ctx, ttl)
	cl.mu.Lock()
	hd.Extends = append(hd.Extends, extend{TTL: ttl, At: at, OK: err == nil})
	cl.mu.Unlock()
}

// reenter re-enters l through its context with a TTL that is usually (during a long hold: always)
// much shorter, holds that briefly and releases it.
func (w *worker) reenter(l *core.Lock, outer *hold, long bool) {
	c, gen := w.slot.get()
	ttl := w.dur(max(outer.TTL/20, 20*time.Millisecond), max(outer.TTL/4, 20*time.Millisecond))
	if !long && w.rnd.IntN(4) == 0 {
		ttl = w.dur(outer.TTL, 2*outer.TTL)
	}
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: outer.Name, Kind: "ctx", TTL: ttl, Outer: outer.ID}
	if !w.lossGate(outer.Name, outer.Call) {
		return
	}
	var opts []core.AcquireOption
	if w.gate != nil {
		opts = append(opts, core.WithWait(100*time.Millisecond)) // (no long wait with the gate held)
	}
	cctx, cl := w.newCall(l.Context(), hd)
	in, err := c.Acquire(cctx, outer.Name, ttl, opts...)
	w.lossGateDone()
	if err != nil {
		return
	}
	cl.acquired(in)
	w.sleep(in.Context(), w.dur(0, min(ttl/2, outer.TTL/20)))
	cl.live(in.Context())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	w.h.op()
	_ = in.Release(ctx)
}

// owner re-enters a lock another client holds, with WithOwner and a TTL much shorter than the
// owner's, and holds it for up to three of its own TTLs (so its renewals run).
func (w *worker) owner() {
	s, ok := w.reg.pick(w.rnd, w.slot.idx)
	if !ok {
		w.fresh("acquire")
		return
	}
	c, gen := w.slot.get()
	ttl := w.dur(max(s.ttl/20, 20*time.Millisecond), max(s.ttl/4, 20*time.Millisecond))
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: s.name, Kind: "owner", TTL: ttl, Outer: s.id}
	if !w.lossGate(s.name, s.call) {
		return
	}
	ctx, cancel := w.callCtx()
	if w.gate != nil { // no caller that gives up: its script could run after the gate opened
		cancel()
		ctx, cancel = context.WithTimeout(w.ctx, 10*time.Second)
	}
	defer cancel()
	cctx, cl := w.newCall(ctx, hd)
	l, err := c.TryAcquire(cctx, s.name, ttl, core.WithOwner(s.tok))
	w.lossGateDone()
	if err != nil {
		return
	}
	cl.acquired(l)
	w.sleep(l.Context(), w.dur(ttl/2, 3*ttl))
	cl.live(l.Context())
	rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
	defer rcancel()
	w.h.op()
	_ = l.Release(rctx)
}

// do runs Do, a quarter of the time in fair mode where the variant allows it, with work that
// mostly ends well within the TTL.
func (w *worker) do() {
	c, gen := w.slot.get()
	name, ttl := w.names[w.rnd.IntN(len(w.names))], w.ttls[w.rnd.IntN(len(w.ttls))]
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: name, Kind: "do", TTL: ttl, Fair: w.fair && (w.allFair || w.rnd.IntN(4) == 0) && !w.skip["fair"]}
	var opts []core.AcquireOption
	if hd.Fair {
		opts = append(opts, core.Fair()) // (its release, whose reply may be lost, hands the lock on)
	}
	w.doWith(c, hd, opts...)
}

// doWith runs c.Do on hd's name and TTL (with opts after WithWait: Permits for a permit).
func (w *worker) doWith(c *core.Client, hd *hold, opts ...core.AcquireOption) {
	name, ttl := hd.Name, hd.TTL
	work := w.dur(0, ttl/2)
	if w.rnd.IntN(4) == 0 {
		work = w.dur(ttl, 2*ttl)
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	cctx, cl := w.newCall(ctx, hd)
	ran := false
	err := c.Do(cctx, name, ttl, func(lctx context.Context) error {
		ran = true
		l, _ := core.FromContext(lctx)
		cl.acquired(l)
		w.sleep(lctx, work)
		at := w.h.now()
		live := lctx.Err() == nil
		cl.mu.Lock()
		hd.DoLive = live
		if live {
			hd.Live = max(hd.Live, at)
		}
		cl.mu.Unlock()
		if w.rnd.IntN(2) == 0 {
			w.loseReplies() // the release that follows may lose its reply and be replayed
		}
		return nil
	}, append([]core.AcquireOption{core.WithWait(w.dur(50*time.Millisecond, time.Second))}, opts...)...)
	if !ran {
		if err != nil {
			w.failed(cl, nil, err)
		}
		return
	}
	at := w.h.now()
	cl.mu.Lock()
	hd.DoRet = at
	switch {
	case errors.Is(err, core.ErrLost):
		hd.DoErr = "lost"
	case err != nil:
		hd.DoErr = err.Error()
	}
	cl.mu.Unlock()
	if errors.Is(err, core.ErrMaxHold) {
		w.checkFreed(cl)
	}
}
