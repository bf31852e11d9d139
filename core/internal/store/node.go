package store

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core/internal/pipe"
	"github.com/lockkit/lockkit/core/internal/script"
	"github.com/lockkit/lockkit/core/internal/wait"
	"github.com/redis/go-redis/v9"
)

// Node is the store over one go-redis client: a plain, Sentinel or Cluster client, or one Redlock
// Node. Each call is one script of core/internal/script.
type Node struct {
	rdb         redis.UniversalClient
	send        script.Runner // sends script calls: a script.Sender over rdb, or over a pipe.Sender over it (WithPipelining)
	pubCmd      any           // "PUBLISH" or "SPUBLISH", boxed once
	id          any           // the client's id, published on release
	cluster     bool
	replicas    int           // WithReplicaAck: replicas that must acknowledge what a holder counts on
	replicaWait time.Duration // and how long to wait for them
	label       any           // "host pid label", recorded with each fresh acquisition (Inspect)
	renewChunk  int           // the most locks per renew_many.lua call (Config.RenewChunk)
	renewBufs   sync.Pool     // of *renewBufs, a renewal round's buffers (renew.go)
	// Fenced: owner checks (renewal, TTL, Extend) also match the acquisition's fence. Off on
	// Redlock's nodes, which may record different fences for one acquisition (the quorum's is
	// written back only where needed).
	Fenced bool
	// primed records the masters whose client set up a connection before a Conn of it (prime).
	primeMu sync.Mutex
	primed  map[string]bool
}

func NewNode(rdb redis.UniversalClient, id string, o *Config) *Node {
	n := &Node{rdb: rdb, send: script.NewSender(rdb), pubCmd: any("PUBLISH"), id: id, replicas: o.Replicas, replicaWait: o.ReplicaWait,
		label: holderLabel(o.Label), renewChunk: RenewChunk}
	if o.RenewChunk > 0 {
		n.renewChunk = o.RenewChunk
	}
	if o.Pipeline > 0 {
		n.send = script.NewSender(pipe.New(rdb, o.Pipeline))
	}
	if _, ok := rdb.(*redis.ClusterClient); ok {
		n.cluster = true
		n.pubCmd = any("SPUBLISH")
	}
	return n
}

func (n *Node) Caps() Caps {
	return Caps{Fair: true, Permits: true, Sets: true, ReentryFence: true}
}

func (n *Node) Close() {}

// addr names the node in errors.
func (n *Node) addr(i int) string {
	if o, ok := n.rdb.(interface{ Options() *redis.Options }); ok {
		return o.Options().Addr
	}
	return "node " + strconv.Itoa(i)
}

func (n *Node) Acquire(ctx context.Context, k *Keys, r *AcquireReq) (AcquireResult, error) {
	call := n.acquireCall(k, r)
	if n.replicas == 0 {
		v, err := call.Run(ctx, n.send).Result()
		if err != nil {
			return AcquireResult{}, err
		}
		return parseAcquire(v)
	}
	var res AcquireResult
	acked, err := n.acked(ctx, call, func(v any) (need bool, err error) {
		res, err = parseAcquire(v)
		return err == nil && res.OK, err // only what the caller will hold must reach the replicas
	})
	if err != nil || !res.OK {
		return res, err
	}
	if acked < int64(n.replicas) {
		_, _ = n.Release(context.WithoutCancel(ctx), k, r.Token, r.Hold, r.Fair, nil, r.TTL)
		return AcquireResult{}, &AckError{what: "the lock", acked: acked, want: int64(n.replicas), wait: n.replicaWait}
	}
	return res, nil
}

// acquireCall is the script call of an acquire attempt.
func (n *Node) acquireCall(k *Keys, r *AcquireReq) script.Call {
	switch {
	case k.Sem != nil:
		return (&script.SemAcquire{Permits: k.Main, Limits: k.Sem.Limits, Fences: k.Sem.Fences, Lock: k.Sem.Lock,
			Queue: k.Queue, Deadlines: k.Deadlines, Token: r.Token, TTL: MS(r.TTL), Limit: r.Limit, Label: n.label,
			Timeout: MS(r.WaiterTTL), Fair: k.Sem.fairArg(r.Fair), Pub: n.pubCmd}).Call()
	case r.Fair:
		return (&script.AcquireFair{Lock: k.Main, Queue: k.Queue, Deadlines: k.Deadlines, Token: r.Token, TTL: MS(r.TTL),
			Timeout: MS(r.WaiterTTL), Hold: r.Hold, Label: n.label, Pub: n.pubCmd, Entry: r.Entry}).Call()
	}
	var floor, ttl any = "", r.TTLArg
	if r.Floor > 0 {
		floor = r.FloorArg
		if floor == nil {
			floor = r.Floor
		}
	}
	if ttl == nil {
		ttl = MS(r.TTL)
	}
	return (&script.Acquire{Lock: k.Main, LockArg: k.MainArg, Guard: r.Guard, Token: r.Token, TTL: ttl, Hold: r.Hold, Label: n.label,
		Floor: floor, Waiting: r.Waiting.arg(), Entry: r.Entry}).CallIn(k.acquireLine())
}

func (n *Node) Release(ctx context.Context, k *Keys, token, hold any, fair bool, set *ReleaseSet, _ time.Duration) (int64, error) {
	return n.releaseWith(ctx, k, token, hold, fair, set, n.id, k.sentFence())
}

// Vanished is what a release answers (in place of -1, not held) when the lock's key was missing
// as a second send of it ran (script.Sends): the key's chain of owner releases, by which a replayed
// release recognises its own earlier run, was gone. That run may have freed the lock, and the next
// holder's key expired since; or the key was lost before the release ran. The caller tells the two
// apart as well as it can: core counts the release done when the hold's validity deadline had not
// passed (the lock could not have expired on its own); a key lost before the first run then goes
// unreported, as it went unseen by the work, which ended under a live context.
const Vanished = -2

// releaseReply maps a release script's reply: -2 (the key was missing) is Vanished when the release was
// sent more than once (sent, nil when not counted), else -1.
func releaseReply(v int64, sent *script.Sends) int64 {
	if v == -2 && (sent == nil || !sent.Replayed()) {
		return -1
	}
	return v
}

// releaseWith releases with payload as the release message (Redlock names the token in it), and
// with sent, when not nil, as a lock's fence argument (Vanished). With set under WithReplicaAck,
// it returns an *AckError with the holds left when the value was written and the release done,
// but too few replicas acknowledged them.
func (n *Node) releaseWith(ctx context.Context, k *Keys, token, hold any, fair bool, set *ReleaseSet, payload any, sent *script.Sends) (int64, error) {
	var call script.Call
	fence := k.fenceArg()
	if sent != nil {
		fence = sent
	}
	switch {
	case k.Sem != nil:
		call = (&script.SemRelease{Permits: k.Main, Limits: k.Sem.Limits, Fences: k.Sem.Fences, Lock: k.Sem.Lock,
			Queue: k.Queue, Deadlines: k.Deadlines, Receipt: k.Sem.Receipt, Token: token, Pub: n.pubCmd, Msg: payload,
			Fair: k.Sem.fairArg(fair)}).Call()
	case fair:
		call = (&script.ReleaseFair{Lock: k.Main, Queue: k.Queue, Deadlines: k.Deadlines, Token: token, Pub: n.pubCmd,
			Hold: hold, Fence: fence}).Call()
	default:
		r := script.Release{Lock: k.Main, LockArg: k.MainArg, Token: token, Pub: n.pubCmd, Msg: payload, Hold: hold, Fence: fence}
		if set != nil {
			r.Set, r.Value, r.ValueTTL = set.Key, set.Value, MS(set.TTL)
		}
		call = r.CallIn(k.releaseLine())
	}
	if set == nil || n.replicas == 0 {
		v, err := call.Run(ctx, n.send).Int64()
		return releaseReply(v, sent), err
	}
	var holds int64
	acked, err := n.acked(ctx, call, func(v any) (bool, error) {
		var ok bool
		if holds, ok = v.(int64); !ok {
			return false, errors.New("unexpected release reply")
		}
		holds = releaseReply(holds, sent)
		return holds >= 0, nil // the value was written
	})
	if err != nil {
		return 0, err
	}
	if holds >= 0 && acked < int64(n.replicas) {
		return holds, &AckError{what: ackedValue, acked: acked, want: int64(n.replicas), wait: n.replicaWait}
	}
	return holds, nil
}

// raiseFence sets the fence recorded for the name on this node to at least fence, and the fence of
// token's lock here to it (Redlock write-back).
func (n *Node) raiseFence(ctx context.Context, k *Keys, token any, fence int64) error {
	return (&script.RaiseFence{Lock: k.Main, Fence: fence, Token: token}).Call().Run(ctx, n.send).Err()
}

// renewCall is the script call renewing item (renew.lua, or sem_renew.lua for a permit).
func (n *Node) renewCall(it *RenewItem) script.Call {
	k := it.K
	if k.Sem != nil {
		return (&script.SemRenew{Permits: k.Main, Limits: k.Sem.Limits, Fences: k.Sem.Fences, Lock: k.Sem.Lock, Token: it.Token,
			TTL: MS(it.TTL), Fence: k.fenceArg()}).Call()
	}
	return (&script.Renew{Lock: k.Main, Token: it.Token, TTL: MS(it.TTL), Fence: n.fenceArg(k)}).Call()
}

// Renew renews items in one pipeline (renewVia): the plain locks' in renew_many.lua calls of up to
// n.renewChunk locks (on a cluster, of one slot), each permit or read-write lease with sem_renew.lua;
// under WithReplicaAck, per master, followed by WAIT (renewAcked).
func (n *Node) Renew(ctx context.Context, items []RenewItem) error {
	if n.replicas > 0 {
		return n.renewAcked(ctx, items)
	}
	_, err := n.renewVia(ctx, n.rdb.Pipeline, items, false)
	return err
}

// fenceArg is the fence an owner check of k's acquisition matches (see node.fenced): "" for none.
func (n *Node) fenceArg(k *Keys) any {
	if !n.Fenced {
		return ""
	}
	return k.fenceArg()
}

func (n *Node) PTTL(ctx context.Context, k *Keys, token any, _ time.Duration) (time.Duration, bool, error) {
	call := (&script.PTTL{Lock: k.Main, Token: token, Fence: n.fenceArg(k)}).Call()
	if k.Sem != nil {
		call = (&script.SemPTTL{Permits: k.Main, Fences: k.Sem.Fences, Token: token, Fence: k.fenceArg()}).Call()
	}
	v, err := call.Run(ctx, n.send).Int64()
	if err != nil || v == -3 {
		return 0, false, err
	}
	return time.Duration(max(v, 0)) * time.Millisecond, true, nil
}

func (n *Node) Extend(ctx context.Context, k *Keys, token any, ttl time.Duration) (bool, error) {
	call := n.renewCall(&RenewItem{K: k, Token: token, TTL: ttl})
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
		err = &AckError{what: "the extension", acked: acked, want: int64(n.replicas), wait: n.replicaWait}
	}
	return v == 1 && err == nil, err
}

func (n *Node) Dequeue(ctx context.Context, k *Keys, r *AcquireReq) error {
	if k.Sem != nil {
		return (&script.SemDequeue{Permits: k.Main, Limits: k.Sem.Limits, Fences: k.Sem.Fences, Lock: k.Sem.Lock,
			Queue: k.Queue, Deadlines: k.Deadlines, Token: r.Token, Pub: n.pubCmd, TTL: MS(r.TTL), Timeout: MS(r.WaiterTTL),
			Limit: r.Limit, Label: n.label, Msg: n.id}).Call().Run(ctx, n.send).Err()
	}
	return (&script.Dequeue{Lock: k.Main, Queue: k.Queue, Deadlines: k.Deadlines, Token: r.Token, Pub: n.pubCmd, Hold: r.Hold,
		TTL: MS(r.TTL), Timeout: MS(r.WaiterTTL), Label: n.label}).Call().Run(ctx, n.send).Err()
}

func (n *Node) Router() wait.Router {
	if c, ok := n.rdb.(*redis.ClusterClient); ok {
		return wait.ClusterRouter(c)
	}
	return wait.PlainRouter(n.rdb)
}

func (n *Node) Inspect(ctx context.Context, l, p *Keys) (Info, error) {
	var rw Keys
	rw.InitRW(l.Main, l.Name, 0)
	v, err := (&script.Inspect{Lock: l.Main, Queue: l.Queue, Deadlines: l.Deadlines,
		Permits: p.Main, Limits: p.Sem.Limits, Fences: p.Sem.Fences, PQueue: p.Queue, PDeadlines: p.Deadlines,
		RW: rw.Main, RWLimits: rw.Sem.Limits, RWFences: rw.Sem.Fences, RWQueue: rw.Queue, RWDeadlines: rw.Deadlines}).Call().
		Run(ctx, n.send).Slice()
	if err != nil {
		return Info{}, err
	}
	return parseInspect(v)
}

func (n *Node) ForceRelease(ctx context.Context, l, p *Keys, msg string) (bool, error) {
	var rw Keys
	rw.InitRW(l.Main, l.Name, 0)
	v, err := (&script.ForceRelease{Lock: l.Main, Queue: l.Queue, Deadlines: l.Deadlines, Permits: p.Main,
		Limits: p.Sem.Limits, Fences: p.Sem.Fences, PQueue: p.Queue, PDeadlines: p.Deadlines, RW: rw.Main,
		RWLimits: rw.Sem.Limits, RWFences: rw.Sem.Fences, RWQueue: rw.Queue, RWDeadlines: rw.Deadlines, Pub: n.pubCmd,
		Msg: msg}).Call().Run(ctx, n.send).Int64()
	return v > 0, err
}

// TakeAll is one all-or-nothing attempt on the locks ks, names of one slot (acquire_all.lua).
func (n *Node) TakeAll(ctx context.Context, ks []*Keys, r *AcquireReq) (SetResult, error) {
	locks := make([]string, len(ks))
	for i, k := range ks {
		locks[i] = k.Main
	}
	call := (&script.AcquireAll{Locks: locks, Token: r.Token, TTL: MS(r.TTL), Hold: r.Hold, Label: n.label,
		Waiting: r.Waiting.arg()}).Call()
	var res SetResult
	if n.replicas == 0 {
		v, err := call.Run(ctx, n.send).Result()
		if err != nil {
			return SetResult{}, err
		}
		return parseSet(v, len(ks))
	}
	acked, err := n.acked(ctx, call, func(v any) (need bool, err error) {
		res, err = parseSet(v, len(ks))
		return err == nil && res.Busy < 0, err
	})
	if err != nil || res.Busy >= 0 {
		return res, err
	}
	if acked < int64(n.replicas) {
		k := *ks[0]
		_, _ = n.ReleaseAll(context.WithoutCancel(ctx), ks, r.Token, r.Hold, res.Fences)
		return SetResult{}, &AckError{what: "the locks of " + k.Name + "'s set", acked: acked, want: int64(n.replicas),
			wait: n.replicaWait}
	}
	return res, nil
}

// parseSet reads acquire_all.lua's reply for n locks.
func parseSet(v any, n int) (SetResult, error) {
	x, ok := v.([]any)
	if ok && len(x) == 3 && x[0] == "busy" {
		i, _ := x[1].(int64)
		pttl, _ := x[2].(int64)
		if i >= 1 && int(i) <= n {
			return SetResult{Busy: int(i) - 1, RetryAfter: time.Duration(max(pttl, 0)) * time.Millisecond}, nil
		}
	}
	if ok && len(x) == n {
		res := SetResult{Busy: -1, Fences: make([]int64, n)}
		for i := range x {
			if res.Fences[i], ok = x[i].(int64); !ok || res.Fences[i] <= 0 {
				return SetResult{}, errAcquireReply
			}
		}
		return res, nil
	}
	return SetResult{}, errAcquireReply
}

// ReleaseAll releases one hold of token on each of ks (one slot; release_all.lua): the holds left
// per lock, -1 where token does not hold it. fences are the acquisitions' (nil: the locks' own).
func (n *Node) ReleaseAll(ctx context.Context, ks []*Keys, token, hold any, fences []int64) ([]int64, error) {
	a := script.ReleaseAll{Locks: make([]string, len(ks)), Token: token, Pub: n.pubCmd, Msg: n.id, Hold: hold,
		Fences: make([]any, len(ks))}
	for i, k := range ks {
		a.Locks[i] = k.Main
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
		left[i] = releaseReply(left[i], nil)
	}
	if len(left) != len(ks) {
		return nil, errors.New("unexpected release reply")
	}
	return left, nil
}

// Digest asks st's server for the SHA-1 (hex) of token: fair waiters and permit waiters are named
// by it in release messages. Only a single node has a Redis-side queue.
func Digest(ctx context.Context, st Store, token string) (string, error) {
	n, ok := st.(*Node)
	if !ok {
		return "", errors.New("lockkit: no Redis-side queue on this store")
	}
	return script.Digest(ctx, n.send, token)
}

// SetRunner replaces what sends n's script calls (tests and benchmarks stand in for Redis).
func (n *Node) SetRunner(r script.Runner) { n.send = r }
