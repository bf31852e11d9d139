package core

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/core/internal/wait"
)

// setCall is one AcquireAll or TryAcquireAll call: its locks, grouped by slot, and its attempts.
type setCall struct {
	c     *Client
	ao    acquireOptions
	waits bool
	start time.Time
	tries int // the attempts made
	wait.Call
	locks  []*Lock         // in the order of the names given
	groups [][]*Lock       // by slot, in slot order, each sorted by name
	keys   [][]*store.Keys // the groups' keys (store.TakeSet)
	fences [][]int64       // the last attempt's fences, per group
	sent   []time.Time     // when the last attempt sent each group
	req    store.AcquireReq
}

// prepare makes the set's locks (one fresh token for all), grouped by slot (one group off a Cluster).
func (sc *setCall) prepare(full []string, ttl time.Duration) {
	c, token := sc.c, store.NewToken()
	sc.req = store.AcquireReq{Token: token, Hold: any("0"), TTL: ttl}
	slot := map[*Lock]int{}
	for _, name := range full {
		l := &Lock{c: c, ttl: ttl, limit: sc.ao.maxHold, token: token, holdID: sc.req.Hold}
		l.k.Init(c.opt.prefix, name)
		sc.locks = append(sc.locks, l)
		if c.st.Caps().Router.Sharded() {
			slot[l] = int(store.Slot(l.k.Main))
		}
	}

	order := slices.Clone(sc.locks)
	slices.SortFunc(order, func(a, b *Lock) int {
		return cmp.Or(cmp.Compare(slot[a], slot[b]), strings.Compare(a.k.Name, b.k.Name))
	})
	for i, l := range order {
		if i == 0 || slot[l] != slot[order[i-1]] {
			sc.groups, sc.keys = append(sc.groups, nil), append(sc.keys, nil)
		}
		g := len(sc.groups) - 1
		sc.groups[g], sc.keys[g] = append(sc.groups[g], l), append(sc.keys[g], &l.k)
	}

	sc.fences, sc.sent = make([][]int64, len(sc.groups)), make([]time.Time, len(sc.groups))
}

// run makes the call's attempts (store.TakeSet, which leaves nothing held by a failed one) until
// every group is taken; it returns the set, or the error that ended the call. names are the
// locks' names, in their order (WaitInfo.Names).
func (sc *setCall) run(ctx context.Context, names []string) (set *LockSet, err error) {
	c, first := sc.c, sc.locks[0]
	info := WaitInfo{Name: first.k.Name, Key: first.k.Main, TTL: sc.req.TTL, Names: names}
	ctx = hooked(ctx, c.hook.WaitStart, info)
	if f := c.hook.WaitDone; f != nil {
		defer func() {
			info.Attempts, info.Duration, info.Outcome, info.Err = sc.tries, time.Since(sc.start), outcome(err), err
			f(ctx, info)
		}()
	}
	if sc.waits && sc.ao.maxWait > 0 {
		sc.Deadline = time.After(sc.ao.maxWait) // (collected unstopped, Go 1.23 on)
	}

	defer func() { sc.Leave(err == nil) }()
	for {
		if err := ctx.Err(); err != nil {
			return nil, sc.notAcquired(nil, 0, err)
		}
		sc.tries++
		sc.req.Waiting = waitMark(sc.waits, sc.tries > 1)
		busy, retry, err := store.TakeSet(ctx, c.st, c.backs, sc.keys, &sc.req, sc.fences, sc.sent)
		if err != nil {
			busy, retry, err = nil, 0, unavailable("acquire", err)
		}
		if f := c.hook.Attempt; f != nil {
			f(ctx, WaitInfo{Name: first.k.Name, Key: first.k.Main, TTL: sc.req.TTL, Attempts: sc.tries,
				Woken: sc.W != nil, Acquired: err == nil && busy == nil, RetryAfter: retry, Err: err})
		}

		switch {
		case err != nil:
			if cerr := ctx.Err(); cerr != nil {
				return nil, sc.notAcquired(nil, 0, cerr)
			}
			return nil, err
		case busy == nil:
			return sc.handOut(ctx)
		case !sc.waits:
			return nil, sc.notAcquired(busy, retry, nil)
		}

		// Wait for the release of the lock found taken (or its expiry), then try again.
		if sc.W != nil && sc.W.Channel() != busy.Channel {
			sc.Leave(false)
			sc.W = nil
		}

		why := wait.Closed // (when the Join below finds the Client closed)
		switch {
		case sc.W != nil:
			why = sc.Park(ctx, min(sc.Backoff, retry+time.Millisecond), false)
		case sc.Join(busy.Channel):
			why = sc.Ready(ctx) // (a release may have come before the subscription)
		}
		switch why { // (a cancelled context ends the call at the top of the next attempt)
		case wait.Closed:
			return nil, ErrClosed
		case wait.Deadline:
			return nil, sc.notAcquired(busy, retry, nil)
		}
	}
}

// handOut makes the taken locks held, each checked against its validity, then handed out in the
// order taken, each one's context under the previous one's: the last one's ends with any of them.
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
			l.outer = prev // a lock acquired with the set's context re-enters the set's lock of its name
			if _, err := c.handOut(ctx, parent, l, sc.fences[gi][i], 1, sc.sent[gi]); err != nil {
				return nil, err // (closed: handOut released l; Close releases the others)
			}
			parent, prev = l.Context(), l
		}
	}

	s.ctx = &valueCtx[setKey, *LockSet]{Context: prev.Context(), v: s}
	return s, nil
}

// notAcquired is the error of a set call that ended without its locks.
func (sc *setCall) notAcquired(busy *store.Keys, retry time.Duration, cause error) error {
	name := sc.locks[0].k.Name
	if busy != nil {
		name = busy.Name
	}
	return notAcquired(name, retry, sc.tries, sc.waits, sc.start, cause)
}
