package chaos_test

import (
	"context"
	"errors"
	"time"

	"github.com/lockkit/lockkit/core"
)

// Sets of locks (core.Client.AcquireAll, TryAcquireAll, DoAll) in the safety checker: a worker takes
// two or three of the variant's names at once, all or nothing, holds them under the set's context
// and releases them together, among the other workers' single-name holds of the same names. Each
// name of a set is recorded as a hold of its own (kind "set"), so the oracle's checks apply to it
// as to any hold: no two owners of one name live at once, fences increasing per name, no loss while
// the path is healthy; and a failed set is a failed acquisition of each of its names, so that the
// orphan check finds any name it left held (nothing may be left behind).

// setMembers is what a set call carries for core's Acquired hook: the hold record of each name.
type setMembers map[string]*call

// set takes a set of names and holds it.
func (w *worker) set() {
	c, gen := w.slot.get()
	k := min(2+w.rnd.IntN(2), len(w.names)) // (the mixed variant has two names)
	names := make([]string, k)
	for i, p := range w.rnd.Perm(len(w.names))[:k] {
		names[i] = w.names[p]
	}
	ttl := w.ttls[w.rnd.IntN(len(w.ttls))]
	kind := [...]string{"set-acquire", "set-try", "set-do"}[w.rnd.IntN(3)]
	w.h.count(kind)
	ctx, cancel := w.callCtx()
	defer cancel()
	sctx, sc := w.h.newCall(ctx, &hold{Client: w.slot.idx, Gen: gen, Name: names[0], Kind: kind, TTL: ttl})
	members := setMembers{}
	for _, n := range names {
		// Each lock of a set gets its Client's WithDefaultMaxHold (the last client's, in the lock
		// variants): recorded, so that the oracle knows the limit that may end it.
		members[n] = &call{h: w.h, set: sc, hold: &hold{Client: w.slot.idx, Gen: gen, Name: n, Kind: "set", TTL: ttl,
			MaxHold: w.slot.maxHold, Call: sc.hold.Call}}
	}
	sc.members = members
	var opts []core.AcquireOption
	if kind != "set-try" {
		opts = append(opts, core.WithWait(w.dur(200*time.Millisecond, 3*time.Second)))
	}
	work := w.dur(0, min(ttl/3, 300*time.Millisecond))
	if w.rnd.IntN(4) == 0 {
		work = w.dur(ttl, 2*ttl) // long enough to need renewals, and to meet a fault
	}
	hold := func(locks []*core.Lock, setCtx context.Context) {
		for _, l := range locks {
			m := members[l.Name()]
			sc.mu.Lock()
			prev, attempt := sc.prev, sc.attempt
			sc.mu.Unlock()
			m.mu.Lock()
			m.prev, m.attempt = prev, attempt
			m.mu.Unlock()
			m.acquired(l)
		}
		end := time.Now().Add(work)
		for time.Now().Before(end) && setCtx.Err() == nil && !w.stopped() {
			w.sleep(setCtx, min(time.Until(end), w.dur(ttl/5, ttl/3)))
			for _, l := range locks {
				members[l.Name()].live(l.Context())
			}
		}
	}
	var err error
	switch kind {
	case "set-do":
		ran := false
		err = c.DoAll(sctx, names, ttl, func(setCtx context.Context) error {
			ran = true
			if locks := memberLocks(members); locks != nil {
				hold(locks, setCtx)
			}
			return nil
		}, opts...)
		if ran {
			return // (a loss while it ran is the holds' own record)
		}
	case "set-try":
		var s *core.LockSet
		if s, err = c.TryAcquireAll(sctx, names, ttl); err == nil {
			hold(s.Locks(), s.Context())
			w.h.op()
			_ = s.Release(context.Background())
			return
		}
	default:
		var s *core.LockSet
		if s, err = c.AcquireAll(sctx, names, ttl, opts...); err == nil {
			hold(s.Locks(), s.Context())
			w.h.op()
			_ = s.Release(context.Background())
			return
		}
	}
	w.setFailed(sc, names, ttl, err)
}

// memberLocks returns the locks of a set that DoAll holds, as core's Acquired hook handed them to
// the members (nil if one is missing).
func memberLocks(members setMembers) []*core.Lock {
	var locks []*core.Lock
	for _, m := range members {
		m.mu.Lock()
		if m.lock != nil {
			locks = append(locks, m.lock)
		}
		m.mu.Unlock()
	}
	if len(locks) != len(members) {
		return nil
	}
	return locks
}

// setFailed records a failed set as a failed acquisition of each of its names, when an attempt
// may have been in flight (its script may have run).
func (w *worker) setFailed(sc *call, names []string, ttl time.Duration, err error) {
	sc.mu.Lock()
	tok := sc.tok
	sc.mu.Unlock()
	inFlight := !errors.Is(err, core.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	if tok != "" && inFlight {
		at := w.h.now()
		w.h.mu.Lock()
		for _, n := range names {
			w.h.fails = append(w.h.fails, &failed{Client: sc.hold.Client, Name: n, Tok: tok, TTL: ttl, Call: sc.hold.Call, Ret: at,
				Err: err.Error()})
		}
		w.h.mu.Unlock()
	}
	if !errors.Is(err, core.ErrNotAcquired) {
		w.sleep(context.Background(), w.dur(5*time.Millisecond, 50*time.Millisecond)) // back off while Redis is unreachable
	}
}

// memberCtx is core's Acquired hook for a set's lock: the lock's context carries that name's member
// call (so that its renewals and loss are recorded on its own hold), and the member notes its lock.
func memberCtx(ctx context.Context, info core.HoldInfo) context.Context {
	c := callOf(ctx)
	if c != nil && c.set != nil {
		c = c.set // a later lock of the set: its parent is the previous lock's context
	}
	if c == nil || c.members == nil {
		return nil
	}
	m := c.members[info.Lock.Name()]
	if m == nil {
		return nil
	}
	m.mu.Lock()
	m.lock = info.Lock
	m.mu.Unlock()
	return context.WithValue(ctx, callKey{}, m)
}
