package store

import (
	"cmp"
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

// Node is the store over one go-redis client (plain, Sentinel or Cluster), or one Redlock node.
type Node struct {
	rdb         redis.UniversalClient
	send        script.Runner // a script.Sender over rdb, or over a pipe.Sender over it (WithPipelining)
	pubCmd      any           // "PUBLISH" or "SPUBLISH", boxed once
	id          any           // the client's id, published on release
	cluster     bool
	replicas    int           // WithReplicaAck: replicas that must acknowledge what a holder counts on
	replicaWait time.Duration // and how long to wait for them
	label       any           // "host pid label", recorded with each fresh acquisition (Inspect)
	caps        Caps
	renewChunk  int       // the most locks per renew_many.lua call (Config.RenewChunk)
	renewBufs   sync.Pool // of *renewBufs, a renewal round's buffers (renew.go)
	// Fenced: owner checks (renewal, TTL, Extend) also match the acquisition's fence. Off on
	// Redlock's nodes, which may record different fences for one acquisition.
	Fenced bool
	// primed records the masters whose client set up a connection before a Conn of it (prime).
	primeMu sync.Mutex
	primed  map[string]bool
}

// NewNode returns the store over rdb; id is the Client's id.
func NewNode(rdb redis.UniversalClient, id string, o *Config) *Node {
	n := &Node{rdb: rdb, send: script.NewSender(rdb), pubCmd: any("PUBLISH"), id: id, replicas: o.Replicas,
		replicaWait: o.ReplicaWait, label: HolderLabel(o.Label), renewChunk: cmp.Or(o.RenewChunk, RenewChunk),
		primed: map[string]bool{}}
	n.caps = Caps{Fair: true, Permits: true, Sets: true, ReentryFence: true, Router: wait.PlainRouter(rdb)}
	n.renewBufs.New = func() any { return new(renewBufs) }
	if o.Pipeline > 0 {
		n.send = script.NewSender(pipe.New(rdb, o.Pipeline))
	}
	if c, ok := rdb.(*redis.ClusterClient); ok {
		n.cluster = true
		n.pubCmd = any("SPUBLISH")
		n.caps.Router = wait.ClusterRouter(c)
	}
	return n
}

// Caps: every kind of hold; release channels on rdb's servers.
func (n *Node) Caps() Caps { return n.caps }

// Close: a Node has no background work of its own.
func (n *Node) Close() {}

// addr names the node in errors.
func (n *Node) addr(i int) string {
	if o, ok := n.rdb.(interface{ Options() *redis.Options }); ok {
		return o.Options().Addr
	}
	return "node " + strconv.Itoa(i)
}

// Acquire is one attempt of r. Under WithReplicaAck, a grant too few replicas acknowledged is
// given back and answered with an *AckError.
func (n *Node) Acquire(ctx context.Context, r *AcquireReq) (AcquireResult, error) {
	parse := parseAcquire
	if m := len(r.Set); m > 0 {
		parse = func(v any) (AcquireResult, error) { return parseSet(v, m) }
	}
	res, acked, err := n.grant(ctx, n.acquireCall(r), parse)
	if err != nil || !res.OK || acked >= int64(n.replicas) {
		return res, err
	}

	rel := ReleaseReq{Keys: r.Keys, Set: r.Set, Fences: res.Fences, Token: r.Token, Hold: r.Hold, Fair: r.Fair,
		LockTTL: r.TTL}
	_, _ = n.Release(context.WithoutCancel(ctx), rel)
	what := "the lock"
	if r.Set != nil {
		what = "the locks of " + r.Set[0].Name + "'s set"
	}
	return AcquireResult{}, n.ackError(what, acked)
}

// grant runs call, an acquisition or extension, and reads its reply with parse; under
// WithReplicaAck, it also returns how many replicas acknowledged a grant (n.replicas if none must).
func (n *Node) grant(ctx context.Context, call script.Call,
	parse func(any) (AcquireResult, error)) (AcquireResult, int64, error) {
	if n.replicas == 0 {
		v, err := call.Run(ctx, n.send).Result()
		if err != nil {
			return AcquireResult{}, 0, err
		}
		res, err := parse(v)
		return res, 0, err
	}

	var res AcquireResult
	acked, err := n.acked(ctx, call, func(v any) (need bool, err error) {
		res, err = parse(v)
		return err == nil && res.OK, err // only what the caller will hold must reach the replicas
	})
	return res, acked, err
}

// acquireCall is the script call of an acquire attempt: of a set's locks with acquire_all.lua.
func (n *Node) acquireCall(r *AcquireReq) script.Call {
	k := r.Keys
	switch {
	case r.Set != nil:
		locks := make([]string, len(r.Set))
		for i, sk := range r.Set {
			locks[i] = sk.Main
		}
		return (&script.AcquireAll{Locks: locks, Token: r.Token, TTL: MS(r.TTL), Hold: r.Hold, Label: n.label,
			Waiting: r.Waiting.arg()}).Call()
	case k.Sem != nil:
		return (&script.SemAcquire{Permits: k.Main, Limits: k.Sem.Limits, Fences: k.Sem.Fences, Lock: k.Sem.Lock,
			Queue: k.Queue, Deadlines: k.Deadlines, Token: r.Token, TTL: MS(r.TTL), Limit: r.Limit, Label: n.label,
			Timeout: MS(r.WaiterTTL), Fair: k.Sem.fairArg(r.Fair), Pub: n.pubCmd}).Call()
	case r.Fair:
		return (&script.AcquireFair{Lock: k.Main, Queue: k.Queue, Deadlines: k.Deadlines, Token: r.Token, TTL: MS(r.TTL),
			Timeout: MS(r.WaiterTTL), Hold: r.Hold, Label: n.label, Pub: n.pubCmd, Entry: r.Entry}).Call()
	}
	floor, ttl := cmp.Or(r.Floor, any("")), r.TTLArg
	if ttl == nil {
		ttl = MS(r.TTL)
	}
	return (&script.Acquire{Lock: k.Main, LockArg: k.MainArg, Guard: r.Guard, Token: r.Token, TTL: ttl, Hold: r.Hold, Label: n.label,
		Floor: floor, Waiting: r.Waiting.arg(), Entry: r.Entry}).CallIn(k.acquireLine())
}

// Release gives back what r names (ReleaseReq).
func (n *Node) Release(ctx context.Context, r ReleaseReq) (ReleaseResult, error) {
	switch {
	case r.Waiter != nil:
		return ReleaseResult{}, n.dequeue(ctx, r.Keys, r.Waiter)
	case r.Set != nil:
		left, err := n.releaseAll(ctx, &r)
		return ReleaseResult{SetLeft: left}, err
	}
	left, err := n.releaseWith(ctx, &r, n.id, r.Keys.sentFence())
	return ReleaseResult{Left: left}, err
}

// Vanished is what a release answers (in place of -1, not held) when the lock's key, whose chain
// of owner releases lets a replayed release recognise its earlier run, was missing as a second
// send of it ran (script.Sends). That run may have freed the lock, and the next holder's key
// expired since; or the key was lost before it. core counts the release done when the hold's
// validity deadline had not passed (the lock could not have expired on its own).
const Vanished = -2

var errReleaseReply = errors.New("unexpected release reply")

// releaseReply maps a release script's reply: -2 (the key was missing) is Vanished when the
// release was sent more than once (sent, nil when not counted), else -1.
func releaseReply(v int64, sent *script.Sends) int64 {
	if v == -2 && (sent == nil || !sent.Replayed()) {
		return -1
	}
	return v
}

// releaseWith releases with payload as the release message, and sent, when not nil, as a lock's
// fence argument (Vanished). Under WithReplicaAck, a value written with too few acknowledgements
// returns the holds left and an *AckError.
func (n *Node) releaseWith(ctx context.Context, r *ReleaseReq, payload any, sent *script.Sends) (int64, error) {
	k, token, hold, fair, set := r.Keys, r.Token, r.Hold, r.Fair, r.Write
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
		rel := script.Release{Lock: k.Main, LockArg: k.MainArg, Token: token, Pub: n.pubCmd, Msg: payload, Hold: hold, Fence: fence}
		if set != nil {
			rel.Set, rel.Value, rel.ValueTTL = set.Key, set.Value, MS(set.TTL)
		}
		call = rel.CallIn(k.releaseLine())
	}

	if set == nil || n.replicas == 0 {
		v, err := call.Run(ctx, n.send).Int64()
		return releaseReply(v, sent), err
	}

	var holds int64
	acked, err := n.acked(ctx, call, func(v any) (bool, error) {
		var ok bool
		if holds, ok = v.(int64); !ok {
			return false, errReleaseReply
		}
		holds = releaseReply(holds, sent)
		return holds >= 0, nil // the value was written
	})
	if err != nil {
		return 0, err
	}
	if holds >= 0 && acked < int64(n.replicas) {
		return holds, n.ackError(ackedValue, acked)
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

// Renew renews items in one pipeline (renewVia); under WithReplicaAck, one per master, followed by
// WAIT (renewAcked).
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

// TTL reads the TTL left on r.Token's hold, or with r.Extend sets it (as a renewal does). Under
// WithReplicaAck an extension counts only once the replicas have it (a replica promoted without it
// would let the lock expire early): too few acknowledgements answer an *AckError.
func (n *Node) TTL(ctx context.Context, r TTLReq) (time.Duration, bool, error) {
	k, token := r.Keys, r.Token
	if r.Extend > 0 {
		call := n.renewCall(&RenewItem{K: k, Token: token, TTL: r.Extend})
		res, acked, err := n.grant(ctx, call, parseRenew)
		if err == nil && res.OK && acked < int64(n.replicas) {
			err = n.ackError("the extension", acked)
		}
		return r.Extend, res.OK && err == nil, err
	}

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

// parseRenew reads a renewal's reply (renew.lua, sem_renew.lua) as an acquisition's: OK if renewed.
func parseRenew(v any) (AcquireResult, error) {
	renewed, _ := v.(int64)
	return AcquireResult{OK: renewed == 1}, nil
}

// dequeue takes the waiting acquisition r out of k's queue, handing on what a release granted it.
func (n *Node) dequeue(ctx context.Context, k *Keys, r *AcquireReq) error {
	if k.Sem != nil {
		return (&script.SemDequeue{Permits: k.Main, Limits: k.Sem.Limits, Fences: k.Sem.Fences, Lock: k.Sem.Lock,
			Queue: k.Queue, Deadlines: k.Deadlines, Token: r.Token, Pub: n.pubCmd, TTL: MS(r.TTL), Timeout: MS(r.WaiterTTL),
			Limit: r.Limit, Label: n.label, Msg: n.id}).Call().Run(ctx, n.send).Err()
	}
	return (&script.Dequeue{Lock: k.Main, Queue: k.Queue, Deadlines: k.Deadlines, Token: r.Token, Pub: n.pubCmd, Hold: r.Hold,
		TTL: MS(r.TTL), Timeout: MS(r.WaiterTTL), Label: n.label}).Call().Run(ctx, n.send).Err()
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
