package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core/internal/pipe"
)

// rlAcquire is one Redlock acquisition attempt: its request, the nodes' answers, and what becomes
// of the grants that arrive after it stopped waiting for them. One allocation holds all of it.
type rlAcquire struct {
	fan
	rl *Redlock
	k  *Keys // &keys: the attempt's own copy
	// keys is the caller's keys as they were when the attempt began: the nodes that answer after
	// it returned (late grants, raised or given back) read them while the caller's copy becomes
	// the hold's (Keys.Held writes its fence: a data race the checker's -race run found).
	keys Keys
	r    AcquireReq  // the request, with the fence floor of this attempt
	own  []nodeGrant // each node's answer, written by its goroutine
	got  []nodeGrant // the answers that came while the attempt waited; errNodeTimeout for the others
	buf  [2 * inlineNodes]nodeGrant

	// Late grants are kept when the acquisition succeeded (the lock then lives on more nodes than
	// the quorum, which is what lets it survive the loss of a node; such a node is made to agree
	// with the acquisition's fence), and given back when it failed.
	smu      sync.Mutex
	decided  bool
	keepLate bool
	fence    int64
	pending  []int // late nodes answered before the outcome was decided
	// Once decided: out counts the requests still running; flying, that the attempt succeeded
	// with some still running, and is in rl.flights; landed (made by the first release that
	// waits) is closed when they all returned; dropLate, that a release of the hold stopped
	// waiting for them, so their grants are given back. See redlock_flight.go.
	out      int
	flying   bool
	landed   chan struct{}
	dropLate bool
}

type nodeGrant struct {
	res AcquireResult
	err error
}

func (a *rlAcquire) call(ctx context.Context, i int) bool {
	g := &a.own[i]
	g.res, g.err = a.rl.nodes[i].Acquire(ctx, &a.r)
	return g.err == nil && g.res.OK
}

func (a *rlAcquire) keep(i int) { a.got[i] = a.own[i] }

func (a *rlAcquire) late(i int) {
	a.smu.Lock()
	if !a.decided {
		a.pending = append(a.pending, i)
		a.smu.Unlock()
		return
	}
	keep := a.keepLate && !a.dropLate
	a.land()
	a.smu.Unlock()
	a.settleLate(i, keep)
}

// decide settles the late grants once the outcome is known, fence being the acquisition's; late
// is how many nodes had not answered when the attempt stopped waiting for them.
func (a *rlAcquire) decide(keep bool, fence int64, late int) {
	a.smu.Lock()
	a.decided, a.keepLate, a.fence = true, keep, fence
	pending := a.pending
	a.pending = nil
	if keep {
		a.fly(late - len(pending))
	}
	a.smu.Unlock()
	for _, i := range pending {
		go a.settleLate(i, keep) // bounded by the node timeout; the acquisition need not wait
	}
}

// settleLate raises a late grant's fence to the acquisition's (keep), or gives back a late grant,
// or a lost reply, of a failed acquisition.
func (a *rlAcquire) settleLate(i int, keep bool) {
	g, n := &a.own[i], a.rl.nodes[i]
	granted := g.err == nil && g.res.OK
	switch {
	case keep && granted && g.res.Fence != a.fence:
		ctx, cancel := context.WithTimeout(context.Background(), a.rl.nodeTimeout(a.r.TTL))
		_ = n.raiseFence(ctx, a.k, a.r.Token, a.fence)
		cancel()
	case !keep && (granted || MayHaveRun(g.err)):
		ctx, cancel := context.WithTimeout(context.Background(), a.rl.nodeTimeout(a.r.TTL))
		pipe.Settle(ctx, g.err) // (a grant left running in the node's pipeline: after it)
		_, _ = n.releaseWith(ctx, &ReleaseReq{Keys: a.k, Token: a.r.Token, Hold: a.r.Hold}, n.id, nil)
		cancel()
	}
}

// Acquire asks every node at once and settles on a quorum of grants (see rlAcquire).
func (rl *Redlock) Acquire(ctx context.Context, r *AcquireReq) (AcquireResult, error) {
	switch {
	case r.Set != nil:
		return AcquireResult{}, errNoSets
	case r.Fair:
		return AcquireResult{}, fmt.Errorf("fair mode is %w", ErrUnsupported)
	}
	k := r.Keys
	start := time.Now()
	a := &rlAcquire{rl: rl, keys: *k, r: *r}
	a.k = &a.keys
	a.r.Keys = a.k
	// One fence floor for every node, from this client's clock: nodes whose counters agree answer
	// the same fence, and the write-back is only needed when they diverged.
	a.r.Floor = start.UnixMilli() * 1000
	a.r.FloorArg = a.r.Floor
	if n := len(rl.nodes); n <= inlineNodes {
		a.own, a.got = a.buf[:n], a.buf[n:2*n]
	} else {
		s := make([]nodeGrant, 2*n)
		a.own, a.got = s[:n], s[n:]
	}
	// A quorum of grants settles an acquisition, unless a guard is checked: any node may hold the
	// guard key, so every node must answer.
	need := rl.quorum
	if r.Guard != "" {
		need = 0
	}
	answered := rl.fanWithin(ctx, rl.nodeTimeout(r.TTL), need, &a.fan, a)
	late := 0
	for i := range a.got {
		if !answered[i] {
			a.got[i] = nodeGrant{err: errNodeTimeout}
			late++
		}
	}
	res, err := rl.acquireQuorum(ctx, k, &a.r, a.got, start)
	a.decide(err == nil && res.OK, res.Fence, late)
	return res, err
}

// acquireQuorum turns the nodes' answers to an acquisition into one; it writes the fence back or
// undoes the grants as needed.
func (rl *Redlock) acquireQuorum(ctx context.Context, k *Keys, r *AcquireReq, got []nodeGrant, start time.Time) (AcquireResult, error) {
	var ok, failed, notHeld int
	var out AcquireResult
	for _, g := range got {
		switch {
		case g.err != nil:
			failed++
		case g.res.NotHeld:
			notHeld++
		case g.res.Guarded:
			out.Guarded, out.Value = true, g.res.Value
		case g.res.OK:
			ok++
			out.Fence = max(out.Fence, g.res.Fence)
			out.Holds = max(out.Holds, g.res.Holds)
		case g.res.Busy && (!out.Busy || g.res.RetryAfter < out.RetryAfter):
			out.Busy, out.RetryAfter = true, g.res.RetryAfter
		}
	}
	validity := r.TTL - time.Since(start) - rl.opt.Drift(r.TTL)
	if ok >= rl.quorum && !out.Guarded && validity > 0 {
		if err := rl.writeBack(ctx, k, r, got, out.Fence); err != nil {
			rl.undo(k, r, got)
			return AcquireResult{}, err
		}
		out.OK = true
		return out, nil
	}
	rl.undo(k, r, got)
	switch {
	case out.Guarded:
		return AcquireResult{Guarded: true, Value: out.Value}, nil
	case notHeld > 0 && ok+failed < rl.quorum:
		// A re-entry: the token cannot hold the lock on a quorum any more.
		return AcquireResult{NotHeld: true}, nil
	case failed > len(rl.nodes)-rl.quorum:
		errs := make([]error, len(got))
		for i := range got {
			errs[i] = got[i].err
		}
		return AcquireResult{}, rl.quorumErr("acquire", ok, errs)
	case ok >= rl.quorum: // validity used up by slow nodes: try again later
		return AcquireResult{Busy: true, RetryAfter: r.TTL / 10}, nil
	}
	return AcquireResult{Busy: out.Busy, RetryAfter: out.RetryAfter, Split: ok > 0}, nil
}

// writeBack makes sure a quorum's fence counters are at least fence before the lock is handed out,
// so that any later quorum sees it. Nodes already there are not written to.
func (rl *Redlock) writeBack(ctx context.Context, k *Keys, r *AcquireReq, got []nodeGrant, fence int64) error {
	have := 0
	var lag []int
	for i, g := range got {
		if g.err == nil && g.res.OK {
			if g.res.Fence >= fence {
				have++
			} else {
				lag = append(lag, i)
			}
		}
	}
	if have >= rl.quorum {
		return nil
	}
	werrs := make([]error, len(rl.nodes))
	todo := make([]bool, len(rl.nodes))
	for _, j := range lag {
		todo[j] = true
	}
	answered := rl.fan(ctx, r.TTL, 0, func(ctx context.Context, i int, n *Node) bool {
		if todo[i] {
			werrs[i] = n.raiseFence(ctx, k, r.Token, fence)
		}
		return true
	}, nil)
	_, we := settle(answered, todo, werrs)
	for i := range todo {
		if !todo[i] {
			we[i] = nil
		} else if we[i] == nil {
			have++
		}
	}
	if have < rl.quorum {
		return rl.quorumErr("fence write-back", have, we)
	}
	return nil
}

// undo releases what a failed attempt took, on every node that granted it or whose reply was lost
// (best effort). Nodes that had not answered yet are undone by settleLate when they do.
func (rl *Redlock) undo(k *Keys, r *AcquireReq, got []nodeGrant) {
	taken := false
	for _, g := range got {
		if g.undo() {
			taken = true
		}
	}
	if !taken {
		return // nothing taken (the common case of a busy lock): no round trip, no goroutine
	}
	rl.fan(context.Background(), r.TTL, 0, func(ctx context.Context, i int, n *Node) bool {
		if got[i].undo() {
			pipe.Settle(ctx, got[i].err)
			_, _ = n.releaseWith(ctx, &ReleaseReq{Keys: k, Token: r.Token, Hold: r.Hold}, n.id, nil)
		}
		return true
	}, nil)
}

// undo reports whether the node may hold a grant that a failed attempt must give back.
func (g *nodeGrant) undo() bool {
	return (g.err == nil && g.res.OK) || (g.err != errNodeTimeout && MayHaveRun(g.err))
}

// rlRelease is one Redlock release: the request and the nodes' answers, in one allocation.
type rlRelease struct {
	fan
	rl       *Redlock
	req      ReleaseReq
	payload  any
	after    *rlAcquire    // the hold's acquisition, if requests of it still run
	own, got []nodeRelease // as in rlAcquire
	buf      [2 * inlineNodes]nodeRelease
}

type nodeRelease struct {
	holds int64
	err   error
}

func (x *rlRelease) call(ctx context.Context, i int) bool {
	r := &x.own[i]
	if x.after != nil {
		if r.err = x.after.releaseAfter(ctx, i); r.err != nil {
			return false
		}
	}
	r.holds, r.err = x.rl.nodes[i].releaseWith(ctx, &x.req, x.payload, nil)
	return r.err == nil && r.holds >= 0
}

func (x *rlRelease) keep(i int) { x.got[i] = x.own[i] }
func (x *rlRelease) late(int)   {}

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
	lockTTL := r.LockTTL
	x := &rlRelease{rl: rl, req: r, payload: rl.nodes[0].id.(string) + "/" + r.Token.(string),
		after: rl.inFlight(r.Keys, r.Token, r.Hold)}
	if n := len(rl.nodes); n <= inlineNodes {
		x.own, x.got = x.buf[:n], x.buf[n:2*n]
	} else {
		s := make([]nodeRelease, 2*n)
		x.own, x.got = s[:n], s[n:]
	}
	// Release returns once a quorum released (or the node timeout passed, or ctx ended); the
	// slower nodes' releases go on in the background for up to 2s (bounded by the TTL, after which
	// there is nothing left to release), so that the lock does not linger on them.
	nt := rl.nodeTimeout(lockTTL)
	rctx, cancel := context.WithTimeout(uncancelled(ctx), max(nt, min(lockTTL, 2*time.Second)))
	x.start(rl, rctx, cancel, rl.quorum, x)
	t := rl.timer(nt)
	rl.wait(ctx, &x.fan, t)
	rl.putTimer(t)
	answered := x.stop()
	for i := range x.got {
		if !answered[i] {
			x.got[i] = nodeRelease{err: errNodeTimeout}
		}
	}
	left, err := rl.tally("release", x.got)
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
