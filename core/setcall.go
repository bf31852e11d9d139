package core

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/core/internal/wait"
)

type setCall struct {
	c     *Client
	ao    acquireOptions
	waits bool
	ttl   time.Duration
	start time.Time
	wait.Call
	locks  []*Lock         // in the order of the names given
	groups [][]*Lock       // by slot, in slot order, each sorted by name
	keys   [][]*store.Keys // the groups' keys (store.TakeSet)
	fences [][]int64       // the last attempt's fences, per group
	sent   []time.Time     // when the last attempt sent each group
	req    store.AcquireReq
}

// prepare makes the set's locks (one fresh token for all) and groups them by slot: on a cluster
// by the slot of each name's hash tag, elsewhere all in one group.
func (sc *setCall) prepare(full []string) {
	c, token := sc.c, store.NewToken()
	limit := c.opt.maxHold
	if sc.ao.limited {
		limit = sc.ao.maxHold
	}
	sc.req = store.AcquireReq{Token: token, Hold: any("0"), TTL: sc.ttl}
	bySlot := map[int][]*Lock{}
	for _, name := range full {
		l := &Lock{c: c, ttl: sc.ttl, limit: limit, token: token, holdID: sc.req.Hold}
		l.k.Init(c.opt.prefix, name)
		sc.locks = append(sc.locks, l)
		slot := 0
		if c.st.Caps().Router.Sharded() {
			slot = int(store.Slot(l.k.Main))
		}
		bySlot[slot] = append(bySlot[slot], l)
	}
	slots := make([]int, 0, len(bySlot))
	for s := range bySlot {
		slots = append(slots, s)
	}
	slices.Sort(slots)
	for _, s := range slots {
		g := bySlot[s]
		slices.SortFunc(g, func(a, b *Lock) int { return strings.Compare(a.k.Name, b.k.Name) })
		ks := make([]*store.Keys, len(g))
		for i, l := range g {
			ks[i] = &l.k
		}
		sc.groups, sc.keys = append(sc.groups, g), append(sc.keys, ks)
	}
	sc.fences, sc.sent = make([][]int64, len(sc.groups)), make([]time.Time, len(sc.groups))
}

// run makes attempts until every group is taken, or the call ends.
func (sc *setCall) run(ctx context.Context) (*LockSet, error) {
	c, first := sc.c, sc.locks[0]
	hctx := ctx
	h := c.hook
	info := WaitInfo{Name: first.k.Name, Key: first.k.Main, TTL: sc.ttl}
	for _, l := range sc.locks {
		info.Names = append(info.Names, l.k.Name)
	}
	if h != nil && h.WaitStart != nil {
		if x := h.WaitStart(ctx, info); x != nil {
			hctx = x
		}
	}
	set, attempts, err := sc.attempts(hctx)
	if h != nil && h.WaitDone != nil {
		info.Attempts, info.Duration, info.Outcome, info.Err = attempts, time.Since(sc.start), outcome(err), err
		h.WaitDone(hctx, info)
	}
	return set, err
}

// attempts makes the call's attempts; it returns the set, or the error that ended the call.
func (sc *setCall) attempts(ctx context.Context) (*LockSet, int, error) {
	c := sc.c
	if sc.waits && sc.ao.maxWait > 0 {
		t := time.NewTimer(sc.ao.maxWait)
		defer t.Stop()
		sc.Deadline = t.C
	}
	acquired := false
	defer func() { sc.Leave(acquired) }()
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return nil, n - 1, sc.notAcquired(nil, 0, n-1, err)
		}
		busy, retry, err := sc.attempt(ctx, n)
		if h := c.hook; h != nil && h.Attempt != nil {
			h.Attempt(ctx, WaitInfo{Name: sc.locks[0].k.Name, Key: sc.locks[0].k.Main, TTL: sc.ttl, Attempts: n,
				Woken: sc.W != nil, Acquired: err == nil && busy == nil, RetryAfter: retry, Err: err})
		}
		switch {
		case err != nil:
			if cerr := ctx.Err(); cerr != nil {
				return nil, n, sc.notAcquired(nil, 0, n, cerr)
			}
			return nil, n, err
		case busy == nil:
			set, err := sc.handOut(ctx)
			acquired = err == nil
			return set, n, err
		case !sc.waits:
			return nil, n, sc.notAcquired(busy, retry, n, nil)
		}
		// Wait for the release of the lock found taken (or its expiry), then try again.
		if sc.W != nil && sc.W.Channel() != busy.Channel {
			sc.Leave(false)
			sc.W = nil
		}
		why := wait.Woken
		if sc.W == nil {
			if !sc.Join(busy.Channel) {
				return nil, n, ErrClosed
			}
			why = sc.Ready(ctx) // a release may have come before the subscription: try again once it is confirmed
		} else {
			why = sc.Park(ctx, min(sc.Backoff, retry+time.Millisecond), false)
		}
		switch why { // (a cancelled context ends the call at the top of the next attempt)
		case wait.Closed:
			return nil, n, ErrClosed
		case wait.Deadline:
			return nil, n, sc.notAcquired(busy, retry, n, nil)
		}
	}
}

// attempt is attempt number n (store.TakeSet): it reports the keys found taken and how long they
// stay taken, if any, or the error that ended it; nothing stays held by a failed attempt.
func (sc *setCall) attempt(ctx context.Context, n int) (busy *store.Keys, retry time.Duration, err error) {
	sc.req.Waiting = store.MarkNone
	if sc.waits {
		sc.req.Waiting = store.MarkWaiting
		if n > 1 {
			sc.req.Waiting = store.MarkWaited
		}
	}
	busy, retry, err = store.TakeSet(ctx, sc.c.st, sc.c.backs, sc.keys, &sc.req, sc.fences, sc.sent)
	if err != nil {
		return nil, 0, unavailable("acquire", err)
	}
	return busy, retry, nil
}

// handOut makes the taken locks held: each checked against its validity (from when its group's
// attempt was sent), then handed out in the order taken, each one's context under the previous
// one's, so that the set's context (the last one's) ends with any of them.
func (sc *setCall) handOut(ctx context.Context) (*LockSet, error) {
	c := sc.c
	for gi, g := range sc.groups {
		if err := c.outlived(ctx, g[0], sc.sent[gi]); err != nil {
			store.ReleaseGroups(ctx, c.st, c.backs, sc.keys, &sc.req, sc.fences)
			return nil, err
		}
	}
	s := &LockSet{locks: sc.locks, groups: sc.groups}
	parent := ctx
	var prev *Lock
	for gi, g := range sc.groups {
		for i, l := range g {
			l.fence = sc.fences[gi][i]
			l.outer = prev // a lock acquired with the set's context re-enters the set's lock of its name
			if _, err := c.handOut(ctx, parent, l, l.fence, 1, sc.sent[gi]); err != nil {
				return nil, err // (closed: handOut released l; Close releases the others)
			}
			parent, prev = l.Context(), l
		}
	}
	s.last = prev
	s.ctx = &setCtx{Context: prev.Context(), s: s}
	return s, nil
}

// notAcquired is the error of a set call that ended without its locks.
func (sc *setCall) notAcquired(busy *store.Keys, retry time.Duration, attempts int, cause error) error {
	name := sc.locks[0].k.Name
	if busy != nil {
		name = busy.Name
	}
	e := &NotAcquiredError{Name: name, RetryAfter: retry, Attempts: attempts}
	if sc.waits {
		e.Waited = max(time.Since(sc.start), 1)
	}
	if cause != nil {
		return errors.Join(e, cause)
	}
	return e
}
