package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core/internal/wait"
	"github.com/redis/go-redis/v9"
)

func (rl *Redlock) quorumErr(op string, ok int, errs []error) error {
	var failed []string
	refused := 0
	for i, err := range errs {
		if err != nil {
			failed = append(failed, rl.nodes[i].addr(i)+": "+err.Error())
		}
		if Refused(err) != "" {
			refused++
		}
	}
	return &QuorumError{Op: op, Nodes: len(rl.nodes), Quorum: rl.quorum, OK: ok, Refused: refused, Errs: failed}
}

// NewRedlock returns the store over nodes (see core.NewRedlock); id is the Client's id.
func NewRedlock(nodes []redis.UniversalClient, id string, cfg *Config) *Redlock {
	rl := &Redlock{quorum: len(nodes)/2 + 1, timeout: cfg.NodeTimeout, rt: wait.NewFanRouter(nodes), opt: cfg, work: newWorkers(),
		rtts: make([]rtt, len(nodes))}
	for _, n := range nodes {
		rl.nodes = append(rl.nodes, NewNode(n, id, cfg)) // (not fenced: see Node.Fenced)
	}
	return rl
}

// Nodes are the Redlock's nodes, in the order given.
func (rl *Redlock) Nodes() []*Node { return rl.nodes }

// Quorum is how many nodes must agree.
func (rl *Redlock) Quorum() int { return rl.quorum }

// Redlock is the store over independent nodes (NewRedlock in core): acquisitions and renewals
// need a quorum, releases go to every node.
type Redlock struct {
	opt     *Config
	nodes   []*Node
	quorum  int
	timeout time.Duration // WithNodeTimeout; 0: from the nodes' round trips (nodeTimeout)
	rtts    []rtt         // each node's round-trip estimate
	rt      wait.Router
	timers  sync.Pool // of *time.Timer, stopped: the waits of releases
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
	k := r.Keys
	// The nodes' goroutines write own, oerrs and short; a late one still may after the fan:
	// read settle's copies only.
	own := make([]int64, len(rl.nodes))
	oerrs := make([]error, len(rl.nodes))
	short := make([]error, len(rl.nodes)) // done, but too few replicas acknowledged (WithReplicaAck)
	after := rl.inFlight(k, r.Token, r.Hold)
	answered := rl.fan(ctx, r.LockTTL, 0, func(ctx context.Context, i int, n *Node) bool {
		if after != nil {
			if oerrs[i] = after.releaseAfter(ctx, i); oerrs[i] != nil {
				return true
			}
		}
		own[i], oerrs[i] = n.releaseWith(ctx, r, n.id, nil)
		var ae *AckError
		if errors.As(oerrs[i], &ae) {
			short[i], oerrs[i] = oerrs[i], nil
		}
		return true
	}, nil)
	shortIn, _ := settle(answered, short, oerrs)
	holds, errs := settle(answered, own, oerrs)
	got := make([]nodeRelease, len(holds))
	for i := range got {
		got[i] = nodeRelease{holds: holds[i], err: errs[i]}
	}
	left, err := rl.tally("release", got)
	if err == nil && left >= 0 {
		err = errors.Join(shortIn...)
	}
	return left, err
}

// tally turns per-node release answers into one. Released if some node released and, with the
// nodes that say the token does not hold the lock there, a quorum is free of us; -1 if a quorum
// says the token does not hold it; else a *QuorumError.
func (rl *Redlock) tally(op string, got []nodeRelease) (int64, error) {
	var ok, notHeld int
	var left int64
	for _, r := range got {
		switch {
		case r.err != nil:
		case r.holds < 0:
			notHeld++
		default:
			ok++
			left = max(left, r.holds)
		}
	}
	switch {
	case ok > 0 && ok+notHeld >= rl.quorum:
		return left, nil
	case notHeld >= rl.quorum:
		return -1, nil
	}
	errs := make([]error, len(got))
	for i := range got {
		errs[i] = got[i].err
	}
	return 0, rl.quorumErr(op, ok, errs)
}

// Renew is the watchdog's batched renewal. A node that does not answer within the renewal bound is
// left behind: waiting for it until the validity deadline would lose locks that a quorum renewed.
func (rl *Redlock) Renew(ctx context.Context, items []RenewItem) error {
	rl.renewWithin(ctx, items, rl.renewBound(ctx, items), 0)
	return nil
}

// renewWithin renews items on every node, waiting at most bound, or only until need nodes renewed
// every item (need 0: every node), and fills in each item's outcome.
func (rl *Redlock) renewWithin(ctx context.Context, items []RenewItem, bound time.Duration, need int) {
	per := make([][]RenewItem, len(rl.nodes))
	errs := make([]error, len(rl.nodes))
	for i := range rl.nodes {
		per[i] = append([]RenewItem(nil), items...)
	}
	answered := rl.fanFor(ctx, bound, need, func(ctx context.Context, i int, n *Node) bool {
		errs[i] = n.Renew(ctx, per[i])
		for _, it := range per[i] {
			if it.Err != nil || !it.OK {
				return false
			}
		}
		return errs[i] == nil
	}, nil)
	for j := range items {
		var ok, notOurs int
		nerrs := make([]error, len(rl.nodes))
		for i := range rl.nodes {
			if !answered[i] { // its goroutine may still be writing per[i]: do not read it
				nerrs[i] = errNodeTimeout
				continue
			}
			switch it := per[i][j]; {
			case it.Err != nil:
				nerrs[i] = it.Err
			case it.OK:
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
			items[j].OK, items[j].Err = false, rl.quorumErr("renew", ok, nerrs)
		}
	}
}

// renewBound is how long a renewal round waits for the nodes: a sixth of the shortest TTL in the
// batch (half the slack between a renewal and the validity deadline), at least the node timeout,
// and never past ctx's deadline.
func (rl *Redlock) renewBound(ctx context.Context, items []RenewItem) time.Duration {
	ttl := items[0].TTL
	for _, it := range items {
		ttl = min(ttl, it.TTL)
	}
	d := max(ttl/6, rl.nodeTimeout(ttl))
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	return d
}

// TTL: a read takes the shortest TTL among a quorum of nodes that hold the lock; an extension
// returns once a quorum renewed, and waits for the other nodes at most the node timeout.
func (rl *Redlock) TTL(ctx context.Context, r TTLReq) (time.Duration, bool, error) {
	if r.Extend > 0 {
		items := []RenewItem{{K: r.Keys, Token: r.Token, TTL: r.Extend}}
		rl.renewWithin(ctx, items, rl.nodeTimeout(r.Extend), rl.quorum)
		return r.Extend, items[0].OK, items[0].Err
	}
	ds := make([]time.Duration, len(rl.nodes))
	oks := make([]bool, len(rl.nodes))
	errs := make([]error, len(rl.nodes))
	in := rl.fan(ctx, r.LockTTL, 0, func(ctx context.Context, i int, n *Node) bool {
		ds[i], oks[i], errs[i] = n.TTL(ctx, r)
		return true
	}, nil)
	d, _ := settle(in, ds, errs)
	held1, e := settle(in, oks, errs)
	var held, answered int
	var least time.Duration
	for i := range d {
		if e[i] != nil {
			continue
		}
		answered++
		if held1[i] {
			if held == 0 || d[i] < least {
				least = d[i]
			}
			held++
		}
	}
	switch {
	case held >= rl.quorum:
		return least, true, nil
	case answered-held > len(rl.nodes)-rl.quorum:
		return 0, false, nil
	}
	return 0, false, rl.quorumErr("pttl", held, e)
}

// inspectTimeout bounds each node's answer to Inspect and ForceRelease on Redlock when
// WithNodeTimeout is not set (there is no lock TTL to derive it from).
const inspectTimeout = time.Second

func (rl *Redlock) Inspect(ctx context.Context, r NameReq) (Info, error) {
	own := make([]Info, len(rl.nodes))
	oerrs := make([]error, len(rl.nodes))
	in := rl.fanFor(ctx, rl.opNodeTimeout(), 0, func(ctx context.Context, i int, n *Node) bool {
		own[i], oerrs[i] = n.Inspect(ctx, r)
		return true
	}, nil)
	infos, errs := settle(in, own, oerrs) // (a late node still writes own, oerrs)
	answered := 0
	count := map[string]int{}
	var out Info
	for i, x := range infos {
		if errs[i] != nil {
			continue
		}
		answered++
		out.Fence = max(out.Fence, x.Fence)
		for _, h := range x.Holders {
			count[h.Digest]++
		}
	}
	if answered < rl.quorum {
		return Info{}, rl.quorumErr("inspect", answered, errs)
	}
	for d, n := range count {
		if n < rl.quorum {
			continue
		}
		var h Holder
		fences := map[int64]int{}
		for i, x := range infos {
			if errs[i] != nil || len(x.Holders) == 0 || x.Holders[0].Digest != d {
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
	own := make([]bool, len(rl.nodes))
	oerrs := make([]error, len(rl.nodes))
	in := rl.fanFor(ctx, rl.opNodeTimeout(), 0, func(ctx context.Context, i int, n *Node) bool {
		own[i], oerrs[i] = n.ForceRelease(ctx, r)
		return true
	}, nil)
	deleted, errs := settle(in, own, oerrs) // (a late node still writes own, oerrs)
	gone, answered := false, 0
	for i := range deleted {
		if errs[i] == nil {
			answered++
			gone = gone || deleted[i]
		}
	}
	if answered < rl.quorum {
		return gone, rl.quorumErr("force release", answered, errs)
	}
	return gone, nil
}

func (rl *Redlock) opNodeTimeout() time.Duration {
	if rl.timeout > 0 {
		return rl.timeout
	}
	return inspectTimeout
}
