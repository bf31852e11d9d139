package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core/internal/pipe"
)

// rlAcquire is one Redlock acquisition attempt: its request, the nodes' answers, and what becomes
// of the grants that arrive after it stopped waiting for them. One allocation holds all of it.
type rlAcquire struct {
	fan[AcquireResult]
	// keys is a copy of the caller's keys: late answers (raised or given back) read it while the
	// caller's becomes the hold's (Keys.Held writes its fence: a data race -race found).
	keys Keys
	r    AcquireReq // the request, on &keys, with the fence floor of this attempt

	// Late grants are kept when the acquisition succeeded (the lock then survives the loss of a
	// node; such a node is made to agree with its fence), and given back when it failed.
	smu      sync.Mutex
	decided  bool
	keepLate bool
	fence    int64
	pending  []int // late nodes answered before the outcome was decided
	// Once decided: out counts the requests still running; flying, that the attempt succeeded
	// with some still running, and is in rl.flights; landed (made by the first release that
	// waits) is closed when they all returned; dropLate, that a release of the hold stopped
	// waiting for them, so their grants are given back.
	out      int
	flying   bool
	landed   chan struct{}
	dropLate bool
}

// granted reports whether the node granted the acquisition.
func granted(g answer[AcquireResult]) bool { return g.err == nil && g.v.OK }

// mayHold reports whether the node may hold a grant that a failed attempt must give back.
func mayHold(g answer[AcquireResult]) bool {
	return granted(g) || (g.err != errNodeTimeout && MayHaveRun(g.err))
}

func (a *rlAcquire) call(ctx context.Context, i int) bool {
	g := &a.own[i]
	g.v, g.err = a.rl.nodes[i].Acquire(ctx, &a.r)
	return granted(*g)
}

// late settles node i's late answer, or leaves it to decide. After the last of the requests still
// running when a successful attempt returned, releases of its hold wait no more.
func (a *rlAcquire) late(i int) {
	a.smu.Lock()
	if !a.decided {
		a.pending = append(a.pending, i)
		a.smu.Unlock()
		return
	}
	keep := a.keepLate && !a.dropLate
	if a.out--; a.flying && a.out == 0 {
		a.flying = false
		a.rl.flights.set(a, false)
		if a.landed != nil {
			close(a.landed)
		}
	}
	a.smu.Unlock()
	a.settleLate(i, keep)
}

// decide settles the late grants once the outcome is known (fence: the acquisition's; late: how
// many nodes had not answered). A success with requests still running is in flight until they
// returned: a release of its hold waits for them (releaseAfter).
func (a *rlAcquire) decide(keep bool, fence int64, late int) {
	a.smu.Lock()
	a.decided, a.keepLate, a.fence = true, keep, fence
	pending := a.pending
	a.pending = nil
	if a.out = late - len(pending); keep && a.out > 0 {
		a.flying = true
		a.rl.flights.set(a, true)
	}
	a.smu.Unlock()

	for _, i := range pending {
		go a.settleLate(i, keep) // bounded by the node timeout; the acquisition need not wait
	}
}

// settleLate raises a late grant's fence to the acquisition's (keep), or gives back a late grant,
// or a lost reply, of a failed acquisition.
func (a *rlAcquire) settleLate(i int, keep bool) {
	g := a.own[i]
	switch {
	case keep && granted(g) && g.v.Fence != a.fence:
		ctx, cancel := context.WithTimeout(context.Background(), a.rl.nodeTimeout(a.r.TTL))
		_ = a.rl.nodes[i].raiseFence(ctx, a.r.Keys, a.r.Token, a.fence)
		cancel()
	case !keep && (granted(g) || MayHaveRun(g.err)):
		ctx, cancel := context.WithTimeout(context.Background(), a.rl.nodeTimeout(a.r.TTL))
		_, _ = a.giveBack(ctx, i, g.err)
		cancel()
	}
}

// giveBack releases what the attempt may have taken on node i, after its request if that was
// left running in the node's pipeline (err).
func (a *rlAcquire) giveBack(ctx context.Context, i int, err error) (int64, error) {
	n := a.rl.nodes[i]
	pipe.Settle(ctx, err)
	return n.releaseWith(ctx, &ReleaseReq{Keys: a.r.Keys, Token: a.r.Token, Hold: a.r.Hold}, n.id, nil)
}

// Acquire asks every node at once and settles on a quorum of grants (see rlAcquire).
func (rl *Redlock) Acquire(ctx context.Context, r *AcquireReq) (AcquireResult, error) {
	switch {
	case r.Set != nil:
		return AcquireResult{}, errNoSets
	case r.Fair:
		return AcquireResult{}, fmt.Errorf("fair mode is %w", ErrUnsupported)
	}

	start := time.Now()
	a := &rlAcquire{keys: *r.Keys, r: *r}
	a.r.Keys = &a.keys
	// One fence floor for every node, from this client's clock: nodes whose counters agree answer
	// the same fence, and the write-back is only needed when they diverged.
	a.r.Floor = start.UnixMilli() * 1000

	// A quorum of grants settles an acquisition, unless a guard is checked: any node may hold the
	// guard key, so every node must answer.
	need := rl.quorum
	if r.Guard != "" {
		need = 0
	}
	late := a.within(ctx, rl, rl.nodeTimeout(r.TTL), need, a)

	res, err := a.outcome(ctx, start)
	a.decide(err == nil && res.OK, res.Fence, late)
	return res, err
}

// outcome turns the nodes' answers into one, writing the fence back or undoing grants as needed.
func (a *rlAcquire) outcome(ctx context.Context, start time.Time) (AcquireResult, error) {
	rl, ttl := a.rl, a.r.TTL
	var ok, failed, notHeld int
	var out AcquireResult
	for _, g := range a.got {
		switch {
		case g.err != nil:
			failed++
		case g.v.NotHeld:
			notHeld++
		case g.v.Guarded:
			out.Guarded, out.Value = true, g.v.Value
		case g.v.OK:
			ok++
			out.Fence = max(out.Fence, g.v.Fence)
			out.Holds = max(out.Holds, g.v.Holds)
		case g.v.Busy && (!out.Busy || g.v.RetryAfter < out.RetryAfter):
			out.Busy, out.RetryAfter = true, g.v.RetryAfter
		}
	}

	validity := ttl - time.Since(start) - rl.opt.Drift(ttl)
	if ok >= rl.quorum && !out.Guarded && validity > 0 {
		if err := a.writeBack(ctx, out.Fence); err != nil {
			a.undo()
			return AcquireResult{}, err
		}
		out.OK = true
		return out, nil
	}

	a.undo()
	switch {
	case out.Guarded:
		return AcquireResult{Guarded: true, Value: out.Value}, nil
	case notHeld > 0 && ok+failed < rl.quorum:
		// A re-entry: the token cannot hold the lock on a quorum any more.
		return AcquireResult{NotHeld: true}, nil
	case failed > len(rl.nodes)-rl.quorum:
		return AcquireResult{}, quorumErr(rl, "acquire", ok, a.got)
	case ok >= rl.quorum: // validity used up by slow nodes: try again later
		return AcquireResult{Busy: true, RetryAfter: ttl / 10}, nil
	}
	return AcquireResult{Busy: out.Busy, RetryAfter: out.RetryAfter, Split: ok > 0}, nil
}

// writeBack makes sure a quorum's fence counters are at least fence before the lock is handed out,
// so that any later quorum sees it. Nodes already there are not written to.
func (a *rlAcquire) writeBack(ctx context.Context, fence int64) error {
	rl, have := a.rl, 0
	for _, g := range a.got {
		if granted(g) && g.v.Fence >= fence {
			have++
		}
	}
	if have >= rl.quorum {
		return nil
	}

	lags := func(i int) bool { return granted(a.got[i]) && a.got[i].v.Fence < fence }
	raised := each(ctx, rl, rl.nodeTimeout(a.r.TTL), 0, func(ctx context.Context, i int, n *Node) (bool, error) {
		if !lags(i) {
			return false, nil
		}
		return true, n.raiseFence(ctx, a.r.Keys, a.r.Token, fence)
	})

	for i, w := range raised {
		if !lags(i) {
			raised[i].err = nil // not asked
		} else if w.err == nil {
			have++
		}
	}
	if have < rl.quorum {
		return quorumErr(rl, "fence write-back", have, raised)
	}
	return nil
}

// undo gives back what a failed attempt took, on every node that granted it or whose reply was
// lost (best effort). Nodes that had not answered yet are undone by settleLate when they do.
func (a *rlAcquire) undo() {
	if !slices.ContainsFunc(a.got, mayHold) {
		return // nothing taken (the common case of a busy lock): no round trip, no goroutine
	}
	t := a.rl.nodeTimeout(a.r.TTL)
	each(context.Background(), a.rl, t, 0, func(ctx context.Context, i int, n *Node) (int64, error) {
		if !mayHold(a.got[i]) {
			return 0, nil
		}
		return a.giveBack(ctx, i, a.got[i].err)
	})
}

// rlRelease is one Redlock release: the request and the nodes' answers, in one allocation.
type rlRelease struct {
	fan[int64] // the holds left per node (-1: the token holds none there)

	req     ReleaseReq
	payload any
	after   *rlAcquire // the hold's acquisition, if requests of it still run
}

func (x *rlRelease) call(ctx context.Context, i int) bool {
	r := &x.own[i]
	if r.err = x.after.releaseAfter(ctx, i); r.err == nil {
		r.v, r.err = x.rl.nodes[i].releaseWith(ctx, &x.req, x.payload, nil)
	}
	return r.err == nil && r.v >= 0
}

// Release gives back one hold on every node (sets and queues are not supported over Redlock).
func (rl *Redlock) Release(ctx context.Context, r ReleaseReq) (ReleaseResult, error) {
	r.Fair = false
	switch {
	case r.Set != nil:
		return ReleaseResult{}, errNoSets
	case r.Waiter != nil:
		return ReleaseResult{}, nil // (no Redis-side queue)
	case r.Write != nil:
		left, err := rl.releaseSet(ctx, &r)
		return ReleaseResult{Left: left}, err
	}

	x := &rlRelease{req: r, payload: rl.nodes[0].id.(string) + "/" + r.Token.(string),
		after: rl.inFlight(r.Keys, r.Token, r.Hold)}

	// Release returns once a quorum released (or the node timeout passed, or ctx ended); the
	// slower nodes' releases go on in the background for up to 2s (bounded by the TTL, after which
	// there is nothing left to release), so that the lock does not linger on them.
	nt := rl.nodeTimeout(r.LockTTL)
	rctx, cancel := context.WithTimeout(uncancelled(ctx), max(nt, min(r.LockTTL, 2*time.Second)))
	x.start(rctx, rl, cancel, rl.quorum, x)

	t := rl.timers.Get().(*time.Timer)
	t.Reset(nt)
	select {
	case <-x.enough:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop() // (since Go 1.23 a stopped or reset timer delivers no stale value)
	rl.timers.Put(t)
	x.stop()

	left, err := rl.tally(x.got)
	return ReleaseResult{Left: left}, err
}

// uncancelled is context.WithoutCancel(ctx), or ctx itself when nothing can cancel it (no Done
// channel: context.Background and the contexts derived from it by values only).
func uncancelled(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		if _, ok := ctx.Deadline(); !ok {
			return ctx
		}
	}
	return context.WithoutCancel(ctx)
}
