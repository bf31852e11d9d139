package core

import (
	"context"
	"errors"
	"github.com/lockkit/lockkit/core/internal/wait"
	"strconv"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core/internal/pipe"
	"github.com/lockkit/lockkit/core/internal/script"
	"github.com/redis/go-redis/v9"
)

// node is the store over one go-redis client: a plain, Sentinel or Cluster client, or one Redlock
// node. Each call is one script of core/internal/script.
type node struct {
	rdb         redis.UniversalClient
	send        script.Runner // sends script calls: a script.Sender over rdb, or over a pipe.Sender over it (WithPipelining)
	pubCmd      any           // "PUBLISH" or "SPUBLISH", boxed once
	id          any           // the client's id, published on release
	cluster     bool
	replicas    int           // WithReplicaAck: replicas that must acknowledge what a holder counts on
	replicaWait time.Duration // and how long to wait for them
	label       any           // "host pid label", recorded with each fresh acquisition (Inspect)
	// fenced: owner checks (renewal, TTL, Extend) also match the acquisition's fence. Off on
	// Redlock's nodes, which may record different fences for one acquisition (the quorum's is
	// written back only where needed).
	fenced bool
	// primed records the masters whose client set up a connection before a Conn of it (prime).
	primeMu sync.Mutex
	primed  map[string]bool
}

func newNode(rdb redis.UniversalClient, id string, o *options) *node {
	n := &node{rdb: rdb, send: script.NewSender(rdb), pubCmd: any("PUBLISH"), id: id, replicas: o.replicas, replicaWait: o.replicaWait,
		label: holderLabel(o.label)}
	if o.pipeline > 0 {
		n.send = script.NewSender(pipe.New(rdb, o.pipeline))
	}
	if _, ok := rdb.(*redis.ClusterClient); ok {
		n.cluster = true
		n.pubCmd = any("SPUBLISH")
	}
	return n
}

func (n *node) caps() caps {
	return caps{fair: true, permits: true, sets: true, reentryFence: true}
}

func (n *node) close() {}

// addr names the node in errors.
func (n *node) addr(i int) string {
	if o, ok := n.rdb.(interface{ Options() *redis.Options }); ok {
		return o.Options().Addr
	}
	return "node " + strconv.Itoa(i)
}

func (n *node) acquire(ctx context.Context, k *keys, r *acquireReq) (acquireResult, error) {
	call := n.acquireCall(k, r)
	if n.replicas == 0 {
		v, err := call.Run(ctx, n.send).Result()
		if err != nil {
			return acquireResult{}, err
		}
		return parseAcquire(v)
	}
	var res acquireResult
	acked, err := n.acked(ctx, call, func(v any) (need bool, err error) {
		res, err = parseAcquire(v)
		return err == nil && res.ok, err // only what the caller will hold must reach the replicas
	})
	if err != nil || !res.ok {
		return res, err
	}
	if acked < int64(n.replicas) {
		_, _ = n.release(context.WithoutCancel(ctx), k, r.token, r.hold, r.fair, nil, r.ttl)
		return acquireResult{}, &ackError{what: "the lock", acked: acked, want: int64(n.replicas), wait: n.replicaWait}
	}
	return res, nil
}

// acquireCall is the script call of an acquire attempt.
func (n *node) acquireCall(k *keys, r *acquireReq) script.Call {
	switch {
	case k.sem != nil:
		return (&script.SemAcquire{Permits: k.main, Limits: k.sem.limits, Fences: k.sem.fences, Lock: k.sem.lock,
			Queue: k.queue, Deadlines: k.dls, Token: r.token, TTL: ms(r.ttl), Limit: r.limit, Label: n.label,
			Timeout: ms(r.waiterTTL), Fair: k.sem.fairArg(r.fair), Pub: n.pubCmd}).Call()
	case r.fair:
		return (&script.AcquireFair{Lock: k.main, Queue: k.queue, Deadlines: k.dls, Token: r.token, TTL: ms(r.ttl),
			Timeout: ms(r.waiterTTL), Hold: r.hold, Label: n.label, Pub: n.pubCmd, Entry: r.entry}).Call()
	}
	var floor, ttl any = "", r.ttlArg
	if r.floor > 0 {
		floor = r.floorArg
		if floor == nil {
			floor = r.floor
		}
	}
	if ttl == nil {
		ttl = ms(r.ttl)
	}
	return (&script.Acquire{Lock: k.main, Guard: r.guard, Token: r.token, TTL: ttl, Hold: r.hold, Label: n.label,
		Floor: floor, Waiting: r.waiting.arg(), Entry: r.entry}).Call()
}

func (n *node) release(ctx context.Context, k *keys, token, hold any, fair bool, set *releaseSet, _ time.Duration) (int64, error) {
	return n.releaseWith(ctx, k, token, hold, fair, set, n.id)
}

// releaseWith releases with payload as the release message (Redlock names the token in it). With
// set under WithReplicaAck, it returns an *ackError with the holds left when the value was written
// and the release done, but too few replicas acknowledged them.
func (n *node) releaseWith(ctx context.Context, k *keys, token, hold any, fair bool, set *releaseSet, payload any) (int64, error) {
	var call script.Call
	switch {
	case k.sem != nil:
		call = (&script.SemRelease{Permits: k.main, Limits: k.sem.limits, Fences: k.sem.fences, Lock: k.sem.lock,
			Queue: k.queue, Deadlines: k.dls, Receipt: k.sem.receipt, Token: token, Pub: n.pubCmd, Msg: payload,
			Fair: k.sem.fairArg(fair)}).Call()
	case fair:
		call = (&script.ReleaseFair{Lock: k.main, Queue: k.queue, Deadlines: k.dls, Token: token, Pub: n.pubCmd,
			Hold: hold, Fence: k.fenceArg()}).Call()
	default:
		r := script.Release{Lock: k.main, Token: token, Pub: n.pubCmd, Msg: payload, Hold: hold, Fence: k.fenceArg()}
		if set != nil {
			r.Set, r.Value, r.ValueTTL = set.key, set.value, ms(set.ttl)
		}
		call = r.Call()
	}
	if set == nil || n.replicas == 0 {
		return call.Run(ctx, n.send).Int64()
	}
	var holds int64
	acked, err := n.acked(ctx, call, func(v any) (bool, error) {
		var ok bool
		if holds, ok = v.(int64); !ok {
			return false, errors.New("unexpected release reply")
		}
		return holds >= 0, nil // the value was written
	})
	if err != nil {
		return 0, err
	}
	if holds >= 0 && acked < int64(n.replicas) {
		return holds, &ackError{what: ackedValue, acked: acked, want: int64(n.replicas), wait: n.replicaWait}
	}
	return holds, nil
}

// raiseFence sets the fence recorded for the name on this node to at least fence, and the fence of
// token's lock here to it (Redlock write-back).
func (n *node) raiseFence(ctx context.Context, k *keys, token any, fence int64) error {
	return (&script.RaiseFence{Lock: k.main, Fence: fence, Token: token}).Call().Run(ctx, n.send).Err()
}

// renewCall is the script call renewing item (renew.lua, or sem_renew.lua for a permit).
func (n *node) renewCall(it *renewItem) script.Call {
	k := it.k
	if k.sem != nil {
		return (&script.SemRenew{Permits: k.main, Limits: k.sem.limits, Fences: k.sem.fences, Lock: k.sem.lock, Token: it.token,
			TTL: ms(it.ttl), Fence: k.fenceArg()}).Call()
	}
	return (&script.Renew{Lock: k.main, Token: it.token, TTL: ms(it.ttl), Fence: n.fenceArg(k)}).Call()
}

func (n *node) renew(ctx context.Context, items []renewItem) error {
	if n.replicas > 0 {
		return n.renewAcked(ctx, items)
	}
	_, err := n.renewVia(ctx, n.rdb.Pipeline, items, false)
	return err
}

// renewVia sends the renewals of items in a pipeline of newPipe's (and, for the scripts the server
// lacked, a second one with EVAL) and fills in their outcomes. With wait, each pipeline ends with
// WAIT for the replicas (WithReplicaAck over a client that gives no connection of its own); the
// last WAIT is returned. It returns an error when every renewal failed.
func (n *node) renewVia(ctx context.Context, newPipe func() redis.Pipeliner, items []renewItem, wait bool) (*redis.IntCmd, error) {
	calls := make([]script.Call, len(items))
	cmds := make([]*redis.Cmd, len(items))
	var w *redis.IntCmd
	exec := func(p redis.Pipeliner) error {
		if wait {
			w = redis.NewIntCmd(ctx, "WAIT", n.replicas, ms(n.replicaWait))
			_ = p.Process(ctx, w)
		}
		_, err := p.Exec(ctx)
		return err
	}
	p := newPipe()
	for i := range items {
		calls[i] = n.renewCall(&items[i])
		cmds[i] = calls[i].Cmd(ctx, n.send)
		_ = p.Process(ctx, cmds[i])
	}
	err := exec(p)
	var again redis.Pipeliner
	for i, c := range cmds {
		if script.IsNoScript(c.Err()) {
			if again == nil {
				again = newPipe()
			}
			cmds[i] = calls[i].Eval(ctx)
			_ = again.Process(ctx, cmds[i])
		}
	}
	if again != nil {
		err = exec(again)
	}
	failed := 0
	for i, c := range cmds {
		v, cerr := c.Int64()
		items[i].ok, items[i].err = v == 1, cerr
		if cerr != nil {
			failed++
		}
	}
	if failed < len(items) {
		return w, nil
	}
	return w, err
}

// fenceArg is the fence an owner check of k's acquisition matches (see node.fenced): "" for none.
func (n *node) fenceArg(k *keys) any {
	if !n.fenced {
		return ""
	}
	return k.fenceArg()
}

func (n *node) pttl(ctx context.Context, k *keys, token any, _ time.Duration) (time.Duration, bool, error) {
	call := (&script.PTTL{Lock: k.main, Token: token, Fence: n.fenceArg(k)}).Call()
	if k.sem != nil {
		call = (&script.SemPTTL{Permits: k.main, Fences: k.sem.fences, Token: token, Fence: k.fenceArg()}).Call()
	}
	v, err := call.Run(ctx, n.send).Int64()
	if err != nil || v == -3 {
		return 0, false, err
	}
	return time.Duration(max(v, 0)) * time.Millisecond, true, nil
}

func (n *node) extend(ctx context.Context, k *keys, token any, ttl time.Duration) (bool, error) {
	call := n.renewCall(&renewItem{k: k, token: token, ttl: ttl})
	if n.replicas == 0 {
		v, err := call.Run(ctx, n.send).Int64()
		return v == 1, err
	}
	// WithReplicaAck: the extension counts only once the replicas have it (a replica promoted
	// without it would let the lock expire earlier than the holder counts on).
	var v int64
	acked, err := n.acked(ctx, call, func(r any) (bool, error) {
		v, _ = r.(int64)
		return v == 1, nil
	})
	if err == nil && v == 1 && acked < int64(n.replicas) {
		err = &ackError{what: "the extension", acked: acked, want: int64(n.replicas), wait: n.replicaWait}
	}
	return v == 1 && err == nil, err
}

func (n *node) dequeue(ctx context.Context, k *keys, r *acquireReq) error {
	if k.sem != nil {
		return (&script.SemDequeue{Permits: k.main, Limits: k.sem.limits, Fences: k.sem.fences, Lock: k.sem.lock,
			Queue: k.queue, Deadlines: k.dls, Token: r.token, Pub: n.pubCmd, TTL: ms(r.ttl), Timeout: ms(r.waiterTTL),
			Limit: r.limit, Label: n.label, Msg: n.id}).Call().Run(ctx, n.send).Err()
	}
	return (&script.Dequeue{Lock: k.main, Queue: k.queue, Deadlines: k.dls, Token: r.token, Pub: n.pubCmd, Hold: r.hold,
		TTL: ms(r.ttl), Timeout: ms(r.waiterTTL), Label: n.label}).Call().Run(ctx, n.send).Err()
}

func (n *node) router() wait.Router {
	if c, ok := n.rdb.(*redis.ClusterClient); ok {
		return wait.ClusterRouter(c)
	}
	return wait.PlainRouter(n.rdb)
}

func (n *node) inspect(ctx context.Context, l, p *keys) (LockInfo, error) {
	var rw keys
	rw.initRW(l.main, l.name, 0)
	v, err := (&script.Inspect{Lock: l.main, Queue: l.queue, Deadlines: l.dls,
		Permits: p.main, Limits: p.sem.limits, Fences: p.sem.fences, PQueue: p.queue, PDeadlines: p.dls,
		RW: rw.main, RWLimits: rw.sem.limits, RWFences: rw.sem.fences, RWQueue: rw.queue, RWDeadlines: rw.dls}).Call().
		Run(ctx, n.send).Slice()
	if err != nil {
		return LockInfo{}, err
	}
	return parseInspect(v)
}

func (n *node) forceRelease(ctx context.Context, l, p *keys, msg string) (bool, error) {
	var rw keys
	rw.initRW(l.main, l.name, 0)
	v, err := (&script.ForceRelease{Lock: l.main, Queue: l.queue, Deadlines: l.dls, Permits: p.main,
		Limits: p.sem.limits, Fences: p.sem.fences, PQueue: p.queue, PDeadlines: p.dls, RW: rw.main,
		RWLimits: rw.sem.limits, RWFences: rw.sem.fences, RWQueue: rw.queue, RWDeadlines: rw.dls, Pub: n.pubCmd,
		Msg: msg}).Call().Run(ctx, n.send).Int64()
	return v > 0, err
}

// takeAll is one all-or-nothing attempt on the locks ks, names of one slot (acquire_all.lua).
func (n *node) takeAll(ctx context.Context, ks []*keys, r *acquireReq) (setResult, error) {
	locks := make([]string, len(ks))
	for i, k := range ks {
		locks[i] = k.main
	}
	call := (&script.AcquireAll{Locks: locks, Token: r.token, TTL: ms(r.ttl), Hold: r.hold, Label: n.label,
		Waiting: r.waiting.arg()}).Call()
	var res setResult
	if n.replicas == 0 {
		v, err := call.Run(ctx, n.send).Result()
		if err != nil {
			return setResult{}, err
		}
		return parseSet(v, len(ks))
	}
	acked, err := n.acked(ctx, call, func(v any) (need bool, err error) {
		res, err = parseSet(v, len(ks))
		return err == nil && res.busy < 0, err
	})
	if err != nil || res.busy >= 0 {
		return res, err
	}
	if acked < int64(n.replicas) {
		k := *ks[0]
		_, _ = n.releaseAll(context.WithoutCancel(ctx), ks, r.token, r.hold, res.fences)
		return setResult{}, &ackError{what: "the locks of " + k.name + "'s set", acked: acked, want: int64(n.replicas),
			wait: n.replicaWait}
	}
	return res, nil
}

// parseSet reads acquire_all.lua's reply for n locks.
func parseSet(v any, n int) (setResult, error) {
	x, ok := v.([]any)
	if ok && len(x) == 3 && x[0] == "busy" {
		i, _ := x[1].(int64)
		pttl, _ := x[2].(int64)
		if i >= 1 && int(i) <= n {
			return setResult{busy: int(i) - 1, retryAfter: time.Duration(max(pttl, 0)) * time.Millisecond}, nil
		}
	}
	if ok && len(x) == n {
		res := setResult{busy: -1, fences: make([]int64, n)}
		for i := range x {
			if res.fences[i], ok = x[i].(int64); !ok || res.fences[i] <= 0 {
				return setResult{}, errAcquireReply
			}
		}
		return res, nil
	}
	return setResult{}, errAcquireReply
}

// releaseAll releases one hold of token on each of ks (one slot; release_all.lua): the holds left
// per lock, -1 where token does not hold it. fences are the acquisitions' (nil: the locks' own).
func (n *node) releaseAll(ctx context.Context, ks []*keys, token, hold any, fences []int64) ([]int64, error) {
	a := script.ReleaseAll{Locks: make([]string, len(ks)), Token: token, Pub: n.pubCmd, Msg: n.id, Hold: hold,
		Fences: make([]any, len(ks))}
	for i, k := range ks {
		a.Locks[i] = k.main
		if fences != nil {
			a.Fences[i] = fences[i]
		} else {
			a.Fences[i] = k.fenceArg()
		}
	}
	v, err := a.Call().Run(ctx, n.send).Slice()
	if err != nil {
		return nil, err
	}
	left := make([]int64, len(v))
	for i := range v {
		left[i], _ = v[i].(int64)
	}
	if len(left) != len(ks) {
		return nil, errors.New("unexpected release reply")
	}
	return left, nil
}
