package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core/internal/wait"
	"github.com/redis/go-redis/v9"
)

func quorumErr[T any](rl *Redlock, op string, ok int, got []answer[T]) error {
	var failed []string
	refused := 0
	for i, a := range got {
		if a.err != nil {
			failed = append(failed, rl.nodes[i].addr(i)+": "+a.err.Error())
		}
		if Refused(a.err) != "" {
			refused++
		}
	}
	return &QuorumError{Op: op, Nodes: len(rl.nodes), Quorum: rl.quorum, OK: ok, Refused: refused, Errs: failed}
}

// NewRedlock returns the store over nodes (see core.NewRedlock); id is the Client's id.
func NewRedlock(nodes []redis.UniversalClient, id string, cfg *Config) *Redlock {
	rl := &Redlock{quorum: len(nodes)/2 + 1, rt: wait.NewFanRouter(nodes), opt: cfg,
		work: &workers{tasks: make(chan task), done: make(chan struct{})},
		rtts: make([]rtt, len(nodes)), flights: flights{m: map[flightKey]*rlAcquire{}}}
	for _, n := range nodes {
		rl.nodes = append(rl.nodes, NewNode(n, id, cfg)) // (not fenced: see Node.Fenced)
	}
	rl.timers.New = func() any { return time.NewTimer(time.Hour) } // (reset before use)
	return rl
}

// Quorum is how many nodes must agree.
func (rl *Redlock) Quorum() int { return rl.quorum }

// Redlock is the store over independent nodes (NewRedlock in core): acquisitions and renewals
// need a quorum, releases go to every node.
type Redlock struct {
	opt     *Config // NodeTimeout: WithNodeTimeout; 0: from the nodes' round trips (nodeTimeout)
	nodes   []*Node
	quorum  int
	rtts    []rtt // each node's round-trip estimate
	rt      wait.Router
	timers  sync.Pool // of *time.Timer, stopped once used: the waits of releases
	work    *workers  // run the requests to the nodes
	flights flights   // acquisitions whose requests to some nodes still run (redlock_flight.go)
}

var errNodeTimeout = errors.New("no answer within the node timeout")

// Caps: neither fair mode nor semaphores nor sets; each attempt takes its own hold, and the store
// undoes what failed attempts took; nodes may record different fences for one acquisition.
func (rl *Redlock) Caps() Caps { return Caps{AttemptHolds: true, Undoes: true, Router: rl.rt} }

// errNoSets: sets of locks are not supported over Redlock (AcquireAll refuses them first).
var errNoSets = fmt.Errorf("sets of locks (AcquireAll) are %w", ErrUnsupported)

// Close stops the workers that send the requests to the nodes.
func (rl *Redlock) Close() { rl.work.stop() }

// releaseSet is release with ReleaseSet's write (r.Write), on every node that holds the lock.
func (rl *Redlock) releaseSet(ctx context.Context, r *ReleaseReq) (int64, error) {
	x := &rlRelease{req: *r, payload: rl.nodes[0].id, after: rl.inFlight(r.Keys, r.Token, r.Hold)}
	x.within(ctx, rl, rl.nodeTimeout(r.LockTTL), 0, x)

	// Too few replicas acknowledged (WithReplicaAck): released all the same, and reported.
	var short []error
	for i, g := range x.got {
		if _, ok := errors.AsType[*AckError](g.err); ok {
			short = append(short, g.err)
			x.got[i].err = nil
		}
	}
	left, err := rl.tally(x.got)
	if err == nil && left >= 0 {
		err = errors.Join(short...)
	}
	return left, err
}

// tally turns per-node release answers into one. Released if some node released and, with the
// nodes that say the token does not hold the lock there, a quorum is free of us; -1 if a quorum
// says the token does not hold it; else a *QuorumError.
func (rl *Redlock) tally(got []answer[int64]) (int64, error) {
	var ok, notHeld int
	var left int64
	for _, r := range got {
		switch {
		case r.err != nil:
		case r.v < 0:
			notHeld++
		default:
			ok++
			left = max(left, r.v)
		}
	}

	switch {
	case ok > 0 && ok+notHeld >= rl.quorum:
		return left, nil
	case notHeld >= rl.quorum:
		return -1, nil
	}
	return 0, quorumErr(rl, "release", ok, got)
}

// Renew is the watchdog's batched renewal. It waits for the nodes a sixth of the shortest TTL in
// the batch (half the slack between a renewal and the validity deadline), at least the node
// timeout: waiting for a node until the validity deadline would lose locks that a quorum renewed.
func (rl *Redlock) Renew(ctx context.Context, items []RenewItem) error {
	ttl := slices.MinFunc(items, func(a, b RenewItem) int { return cmp.Compare(a.TTL, b.TTL) }).TTL
	rl.renewWithin(ctx, items, max(ttl/6, rl.nodeTimeout(ttl)), 0)
	return nil
}

// errNotRenewed: a node did not renew every item (it does not count toward renewWithin's need).
var errNotRenewed = errors.New("not every item renewed")

// renewWithin renews items on every node, waiting at most bound, or only until need nodes renewed
// every item (need 0: every node), and fills in each item's outcome.
func (rl *Redlock) renewWithin(ctx context.Context, items []RenewItem, bound time.Duration, need int) {
	per := make([][]RenewItem, len(rl.nodes))
	for i := range per {
		per[i] = append([]RenewItem(nil), items...)
	}

	got := each(ctx, rl, bound, need, func(ctx context.Context, i int, n *Node) ([]RenewItem, error) {
		err := n.Renew(ctx, per[i])
		if err == nil && slices.ContainsFunc(per[i], func(it RenewItem) bool { return it.Err != nil || !it.OK }) {
			err = errNotRenewed
		}
		return per[i], err
	})

	for j := range items {
		var ok, notOurs int
		errs := make([]answer[bool], len(got)) // the nodes' errors for item j
		for i, a := range got {
			switch {
			case a.err == errNodeTimeout: // (per[i] may still be written: not read)
				errs[i].err = a.err
			case a.v[j].Err != nil:
				errs[i].err = a.v[j].Err
			case a.v[j].OK:
				ok++
			default:
				notOurs++
			}
		}
		switch {
		case ok >= rl.quorum:
			items[j].OK, items[j].Err = true, nil
		case notOurs > len(rl.nodes)-rl.quorum: // a quorum can no longer be ours
			items[j].OK, items[j].Err = false, nil
		default:
			items[j].OK, items[j].Err = false, quorumErr(rl, "renew", ok, errs)
		}
	}
}

// TTL: a read takes the shortest TTL among a quorum of nodes that hold the lock; an extension
// returns once a quorum renewed, and waits for the other nodes at most the node timeout.
func (rl *Redlock) TTL(ctx context.Context, r TTLReq) (time.Duration, bool, error) {
	if r.Extend > 0 {
		items := []RenewItem{{K: r.Keys, Token: r.Token, TTL: r.Extend}}
		rl.renewWithin(ctx, items, rl.nodeTimeout(r.Extend), rl.quorum)
		return r.Extend, items[0].OK, items[0].Err
	}

	got := each(ctx, rl, rl.nodeTimeout(r.LockTTL), 0, func(ctx context.Context, _ int, n *Node) (time.Duration, error) {
		d, held, err := n.TTL(ctx, r)
		if !held {
			d = -1 // not held on n
		}
		return d, err
	})

	var held, answered int
	least := time.Duration(math.MaxInt64)
	for _, a := range got {
		if a.err != nil {
			continue
		}
		answered++
		if a.v >= 0 {
			held++
			least = min(least, a.v)
		}
	}

	switch {
	case held >= rl.quorum:
		return least, true, nil
	case answered-held > len(rl.nodes)-rl.quorum:
		return 0, false, nil
	}
	return 0, false, quorumErr(rl, "pttl", held, got)
}

// inspectTimeout is the node timeout of Inspect and ForceRelease without WithNodeTimeout.
const inspectTimeout = time.Second

// answered runs fn on every node within the node timeout (inspectTimeout without WithNodeTimeout)
// and returns the answers given without error; fewer than a quorum: with a *QuorumError of op.
func answered[T any](ctx context.Context, rl *Redlock, op string, fn func(ctx context.Context, _ int, n *Node) (T, error)) ([]T, error) {
	got := each(ctx, rl, cmp.Or(rl.opt.NodeTimeout, inspectTimeout), 0, fn)
	var ok []T
	for _, a := range got {
		if a.err == nil {
			ok = append(ok, a.v)
		}
	}
	if len(ok) < rl.quorum {
		return ok, quorumErr(rl, op, len(ok), got)
	}
	return ok, nil
}

func (rl *Redlock) Inspect(ctx context.Context, r NameReq) (Info, error) {
	got, err := answered(ctx, rl, "inspect", func(ctx context.Context, _ int, n *Node) (Info, error) {
		return n.Inspect(ctx, r)
	})
	if err != nil {
		return Info{}, err
	}

	count := map[string]int{}
	var out Info
	for _, x := range got {
		out.Fence = max(out.Fence, x.Fence)
		for _, h := range x.Holders {
			count[h.Digest]++
		}
	}

	for d, n := range count {
		if n < rl.quorum {
			continue
		}
		var h Holder
		fences := map[int64]int{}
		for _, x := range got {
			if len(x.Holders) == 0 || x.Holders[0].Digest != d {
				continue
			}
			if !out.Held || x.TTL < out.TTL {
				out.TTL = x.TTL
			}
			if h.Digest == "" || x.Holders[0].Acquired.Before(h.Acquired) {
				h = x.Holders[0]
			}
			out.Held = true
			fences[x.Fence]++
		}
		out.Fence = quorumFence(fences, rl.quorum)
		h.Fence, h.TTL = out.Fence, out.TTL
		out.Holders = append(out.Holders, h)
		out.Mode = h.Mode // "lock": Redlock refuses the other kinds
	}
	return out, nil
}

// quorumFence is the fence of a lock held on several nodes: the value a quorum of them records
// (a successful acquisition leaves the holder's fence on a quorum; a node that granted it late
// may record a larger one), else the largest.
func quorumFence(fences map[int64]int, quorum int) int64 {
	var top int64
	for f, n := range fences {
		if n >= quorum {
			return f
		}
		top = max(top, f)
	}
	return top
}

func (rl *Redlock) ForceRelease(ctx context.Context, r NameReq) (bool, error) {
	got, err := answered(ctx, rl, "force release", func(ctx context.Context, _ int, n *Node) (bool, error) {
		return n.ForceRelease(ctx, r)
	})
	return slices.Contains(got, true), err
}
