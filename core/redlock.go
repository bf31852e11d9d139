package core

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockkit/lockkit/core/internal/wait"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewRedlock returns a Client whose locks live on a quorum of independent Redis nodes (the Redlock
// algorithm): an acquisition succeeds on N/2+1 nodes within its validity (TTL − elapsed − drift);
// renewals need a quorum; releases go to every node. Requests to the nodes run in parallel, each
// bounded by the per-node timeout (WithNodeTimeout), so a slow or dead node costs at most that; and
// Acquire, Release and Extend return once a quorum has answered, so a slow node usually costs
// nothing. (The slower nodes' grants are kept after a successful acquisition, and their releases
// finish in the background; a release goes to such a node only once the acquisition's request to
// it returned.) The requests run on worker goroutines that the Client reuses from one request to
// the next; a worker exits after one to two seconds without work, or on Close.
// The API is the same as New's, except Fair (not supported: each node would keep its own queue).
//
// Fencing tokens stay monotonic across quorums: the fence is the maximum of the quorum's counters,
// and before Acquire returns it is written back (counter = max(counter, fence)) to a quorum unless a
// quorum already had it. This holds as long as nodes keep their data: run them with persistence
// (appendonly yes, appendfsync always) or a restarted node may hand out an old fence.
func NewRedlock(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, invalid("redlock needs at least one node")
	}
	for i, n := range nodes {
		if n == nil {
			return nil, invalid("redlock node %d is nil", i)
		}
		if _, ok := n.(*redis.ClusterClient); ok {
			return nil, invalid("redlock node %d is a cluster client; use independent masters", i)
		}
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	id := wait.ClientIDPrefix + newToken()[:16]
	rl := &redlock{quorum: len(nodes)/2 + 1, timeout: o.nodeTimeout, rt: wait.NewFanRouter(nodes), opt: &o, work: newWorkers()}
	for _, n := range nodes {
		rl.nodes = append(rl.nodes, newNode(n, id, &o)) // (not fenced: see node.fenced)
	}
	return newClient(rl, o, id, rl.quorum), nil
}

type redlock struct {
	opt     *options
	nodes   []*node
	quorum  int
	timeout time.Duration
	rt      wait.Router
	timers  sync.Pool // of *time.Timer, stopped: the waits of releases
	work    *workers  // run the requests to the nodes
	flights flights   // acquisitions whose requests to some nodes still run (redlock_flight.go)
}

var errNodeTimeout = errors.New("no answer within the node timeout")

// QuorumError reports a Redlock operation that did not reach a quorum because nodes failed. It
// matches ErrUnavailable.
type QuorumError struct {
	// Op is the operation ("acquire", "release", "renew", ...).
	Op string
	// Nodes is the number of nodes, Quorum how many must agree, OK how many did.
	Nodes, Quorum, OK int
	// Errs holds, per failed node, "address: error".
	Errs []string
}

// Error summarises the failure and why each failed node failed.
func (e *QuorumError) Error() string {
	return fmt.Sprintf("lockkit: redlock %s: %d of %d nodes succeeded, %d needed; failed: %s",
		e.Op, e.OK, e.Nodes, e.Quorum, strings.Join(e.Errs, "; "))
}

// Is reports whether target is ErrUnavailable.
func (e *QuorumError) Is(target error) bool { return target == ErrUnavailable }

// ErrorType returns "unavailable".
func (e *QuorumError) ErrorType() string { return ErrUnavailable.typ }

func (rl *redlock) quorumErr(op string, ok int, errs []error) error {
	qe := &QuorumError{Op: op, Nodes: len(rl.nodes), Quorum: rl.quorum, OK: ok}
	for i, err := range errs {
		if err != nil {
			qe.Errs = append(qe.Errs, rl.nodes[i].addr(i)+": "+err.Error())
		}
	}
	return qe
}

// caps: neither fair mode nor semaphores; each attempt takes its own hold, and the store undoes
// what failed attempts took; nodes may record different fences for one acquisition.
func (rl *redlock) caps() caps { return caps{attemptHolds: true, undoes: true} }

// takeAll and releaseAll: sets are not supported over Redlock (AcquireAll refuses them first).
func (rl *redlock) takeAll(context.Context, []*keys, *acquireReq) (setResult, error) {
	return setResult{}, errNoSets
}

func (rl *redlock) releaseAll(context.Context, []*keys, any, any, []int64) ([]int64, error) {
	return nil, errNoSets
}

var errNoSets = invalid("sets of locks (AcquireAll) are not supported over Redlock")

// close stops the workers that send the requests to the nodes.
func (rl *redlock) close() { rl.work.stop() }

// releaseSet is release with ReleaseSet's write, on every node that holds the lock.
func (rl *redlock) releaseSet(ctx context.Context, k *keys, token, hold any, set *releaseSet, lockTTL time.Duration) (int64, error) {
	// The nodes' goroutines write own, oerrs and short; a late one still may after the fan:
	// read settle's copies only.
	own := make([]int64, len(rl.nodes))
	oerrs := make([]error, len(rl.nodes))
	short := make([]error, len(rl.nodes)) // done, but too few replicas acknowledged (WithReplicaAck)
	after := rl.inFlight(k, token, hold)
	answered := rl.fan(ctx, lockTTL, 0, func(ctx context.Context, i int, n *node) bool {
		if after != nil {
			if oerrs[i] = after.releaseAfter(ctx, i); oerrs[i] != nil {
				return true
			}
		}
		own[i], oerrs[i] = n.releaseWith(ctx, k, token, hold, false, set, n.id)
		var ae *ackError
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
func (rl *redlock) tally(op string, got []nodeRelease) (int64, error) {
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

// renew is the watchdog's batched renewal. A node that does not answer within the renewal bound is
// left behind: waiting for it until the validity deadline would lose locks that a quorum renewed.
func (rl *redlock) renew(ctx context.Context, items []renewItem) error {
	rl.renewWithin(ctx, items, rl.renewBound(ctx, items), 0)
	return nil
}

// renewWithin renews items on every node, waiting at most bound, or only until need nodes renewed
// every item (need 0: every node), and fills in each item's outcome.
func (rl *redlock) renewWithin(ctx context.Context, items []renewItem, bound time.Duration, need int) {
	per := make([][]renewItem, len(rl.nodes))
	errs := make([]error, len(rl.nodes))
	for i := range rl.nodes {
		per[i] = append([]renewItem(nil), items...)
	}
	answered := rl.fanFor(ctx, bound, need, func(ctx context.Context, i int, n *node) bool {
		errs[i] = n.renew(ctx, per[i])
		for _, it := range per[i] {
			if it.err != nil || !it.ok {
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
			case it.err != nil:
				nerrs[i] = it.err
			case it.ok:
				ok++
			default:
				notOurs++
			}
		}
		switch {
		case ok >= rl.quorum:
			items[j].ok, items[j].err = true, nil
		case notOurs > len(rl.nodes)-rl.quorum: // a quorum can no longer be ours
			items[j].ok, items[j].err = false, nil
		default:
			items[j].ok, items[j].err = false, rl.quorumErr("renew", ok, nerrs)
		}
	}
}

// renewBound is how long a renewal round waits for the nodes: a sixth of the shortest TTL in the
// batch (half the slack between a renewal and the validity deadline), at least the node timeout,
// and never past ctx's deadline.
func (rl *redlock) renewBound(ctx context.Context, items []renewItem) time.Duration {
	ttl := items[0].ttl
	for _, it := range items {
		ttl = min(ttl, it.ttl)
	}
	d := max(ttl/6, rl.nodeTimeout(ttl))
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	return d
}

func (rl *redlock) pttl(ctx context.Context, k *keys, token any, lockTTL time.Duration) (time.Duration, bool, error) {
	ds := make([]time.Duration, len(rl.nodes))
	oks := make([]bool, len(rl.nodes))
	errs := make([]error, len(rl.nodes))
	in := rl.fan(ctx, lockTTL, 0, func(ctx context.Context, i int, n *node) bool {
		ds[i], oks[i], errs[i] = n.pttl(ctx, k, token, lockTTL)
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

// extend returns once a quorum renewed, and waits for the other nodes at most the node timeout.
func (rl *redlock) extend(ctx context.Context, k *keys, token any, ttl time.Duration) (bool, error) {
	items := []renewItem{{k: k, token: token, ttl: ttl}}
	rl.renewWithin(ctx, items, rl.nodeTimeout(ttl), rl.quorum)
	return items[0].ok, items[0].err
}

func (rl *redlock) dequeue(context.Context, *keys, *acquireReq) error { return nil }

func (rl *redlock) router() wait.Router { return rl.rt }

// inspectTimeout bounds each node's answer to Inspect and ForceRelease on Redlock when
// WithNodeTimeout is not set (there is no lock TTL to derive it from).
const inspectTimeout = time.Second

func (rl *redlock) inspect(ctx context.Context, k, p *keys) (LockInfo, error) {
	own := make([]LockInfo, len(rl.nodes))
	oerrs := make([]error, len(rl.nodes))
	in := rl.fanFor(ctx, rl.opNodeTimeout(), 0, func(ctx context.Context, i int, n *node) bool {
		own[i], oerrs[i] = n.inspect(ctx, k, p)
		return true
	}, nil)
	infos, errs := settle(in, own, oerrs) // (a late node still writes own, oerrs)
	answered := 0
	count := map[string]int{}
	var out LockInfo
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
		return LockInfo{}, rl.quorumErr("inspect", answered, errs)
	}
	for d, n := range count {
		if n < rl.quorum {
			continue
		}
		var h HolderInfo
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

func (rl *redlock) forceRelease(ctx context.Context, k, p *keys, msg string) (bool, error) {
	own := make([]bool, len(rl.nodes))
	oerrs := make([]error, len(rl.nodes))
	in := rl.fanFor(ctx, rl.opNodeTimeout(), 0, func(ctx context.Context, i int, n *node) bool {
		own[i], oerrs[i] = n.forceRelease(ctx, k, p, msg)
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

func (rl *redlock) opNodeTimeout() time.Duration {
	if rl.timeout > 0 {
		return rl.timeout
	}
	return inspectTimeout
}
