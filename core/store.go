package core

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// mustScript loads a script made of the named embedded files, in order (lib.lua holds functions
// that several scripts share; Redis scripts cannot include one another). The last file is the
// script itself: a shebang on its first line ("#!lua flags=no-writes") is moved to the front, the
// only place where Redis reads a script's flags.
func mustScript(names ...string) *redis.Script {
	files := make([][]byte, len(names))
	for i, name := range names {
		b, err := luaFiles.ReadFile("lua/" + name)
		if err != nil {
			panic(err)
		}
		if bytes.HasPrefix(b, []byte("#!")) && i != len(names)-1 {
			panic("core: " + name + " has a shebang but is not the script's last file")
		}
		files[i] = b
	}
	var src strings.Builder
	last := files[len(files)-1]
	if bytes.HasPrefix(last, []byte("#!")) {
		line, rest, _ := bytes.Cut(last, []byte("\n"))
		src.Write(line)
		src.WriteByte('\n')
		files[len(files)-1] = rest
	}
	for _, b := range files {
		src.Write(b)
	}
	return redis.NewScript(src.String())
}

// scripts are loaded once per process; they are never modified after init.
type scripts struct {
	acquire, acquireFair, acquireGuarded, release, releaseFair, releaseSet, renew, pttl, dequeue, raiseFence *redis.Script
	inspect, forceRelease                                                                                    *redis.Script
	sem                                                                                                      semScripts

	acquireSha, releaseSha any // their hashes, boxed once (see run)
}

func loadScripts() scripts {
	// Each script carries only the functions it needs; the hot paths (acquire_fast.lua,
	// release_fast.lua) come first and return before any is defined.
	s := scripts{
		acquire:        mustScript("acquire_fast.lua", "lock_lib.lua", "acquire.lua"),
		acquireFair:    mustScript("lib.lua", "lock_lib.lua", "fair_lib.lua", "acquire_fair.lua"),
		acquireGuarded: mustScript("lock_lib.lua", "acquire_guarded.lua"),
		release:        mustScript("release_fast.lua", "lock_lib.lua", "release.lua"),
		releaseFair:    mustScript("lib.lua", "lock_lib.lua", "fair_lib.lua", "release_fair.lua"),
		releaseSet:     mustScript("lock_lib.lua", "release_set.lua"),
		renew:          mustScript("renew.lua"),
		pttl:           mustScript("pttl.lua"),
		dequeue:        mustScript("lib.lua", "lock_lib.lua", "fair_lib.lua", "dequeue.lua"),
		raiseFence:     mustScript("lock_lib.lua", "raise_fence.lua"),
		inspect:        mustScript("lib.lua", "lock_lib.lua", "fair_lib.lua", "inspect.lua"),
		forceRelease:   mustScript("lib.lua", "lock_lib.lua", "fair_lib.lua", "force_release.lua"),
		sem:            loadSemScripts(),
	}
	s.acquireSha, s.releaseSha = s.acquire.Hash(), s.release.Hash()
	return s
}

// run is script.Run (EVALSHA, and if Redis lacks the script SCRIPT LOAD and EVALSHA again) for
// the hot paths, with sha the script's hash boxed once and one argument slice: Script.Run boxes the
// command name, the hash and the keys on every call, into a second copy of the arguments.
func (n *node) run(ctx context.Context, script *redis.Script, sha any, keys []string, args ...any) *redis.Cmd {
	a := make([]any, 3, 3+len(keys)+len(args))
	a[0], a[1], a[2] = "evalsha", sha, len(keys)
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(3)
	_ = n.rdb.Process(ctx, cmd)
	if isNoScript(cmd.Err()) {
		if err := script.Load(ctx, n.rdb).Err(); err != nil {
			cmd.SetErr(err)
			return cmd
		}
		cmd = redis.NewCmd(ctx, a...)
		cmd.SetFirstKeyPos(3)
		_ = n.rdb.Process(ctx, cmd)
	}
	return cmd
}

type acquireResult struct {
	ok         bool
	fence      int64
	holds      int64
	retryAfter time.Duration
	busy       bool   // another owner holds the lock, for retryAfter more (0: it is about to expire)
	epoch      int64  // fair: the caller is queued in Redis, since EPOCH (see fair_lib.lua)
	guarded    bool   // the guard key exists; nothing was taken
	value      string // the guard key's value
	notHeld    bool   // a re-entry found no acquisition of its token to enter (see lk_entry)
}

// acquireReq is one acquire attempt.
type acquireReq struct {
	token     any
	hold      any // this hold's id, unique among the owner's holds
	ttl       time.Duration
	fair      bool
	waiterTTL time.Duration // fair only: 0 tries without queueing
	guard     []string      // lock, fence, guard key; nil without a guard
	floor     int64         // fence floor in µs chosen by the client (Redlock); 0: the server's clock
	ttlArg    any           // ms(ttl), boxed once (nil: boxed per call)
	floorArg  any           // floor, boxed once (nil: boxed per call)
	limit     int           // a semaphore's permits (Permits); 0 for a lock
	waiting   waitMark      // what the acquire script records about the caller's waiting
	// entry marks a re-entry (through a lock's context, or WithOwner): the fence of the
	// acquisition it enters, or "0" for any acquisition of the token. nil: the call may take the
	// lock afresh. A re-entry never takes a lock (lk_entry in lock_lib.lua).
	entry any
}

// waitMark tells the acquire script whether a release of the lock must be published.
type waitMark uint8

const (
	markNone    waitMark = iota // TryAcquire: nobody waits for this call's sake
	markWaiting                 // a waiting call found the lock taken: its release must publish
	markWaited                  // a call that waited takes the lock: others may wait behind it
)

// arg is the mark as acquire.lua's ARGV[6].
func (m waitMark) arg() any {
	switch m {
	case markWaiting:
		return "1"
	case markWaited:
		return "2"
	}
	return "0"
}

type renewItem struct {
	keys  []string
	token any
	fence any // the acquisition's fence: a lock's hold renews only that acquisition (renew.lua)
	ttl   time.Duration
	seq   uint64 // the entry's seq when the renewal was sent
	sem   bool   // a permit's lease (sem_renew.lua)
	ok    bool
	err   error
}

// store is the seam between the lock logic and Redis: one implementation talks to a single client
// (standalone, Sentinel or Cluster), another fans out to independent nodes (Redlock).
type store interface {
	acquire(ctx context.Context, k *keys, r *acquireReq) (acquireResult, error)
	// release drops one hold of token; it returns the holds left, or -1 when token does not hold
	// the lock. fair names the next waiter of the Redis-side queue in the release message. lockTTL
	// (the lock's TTL) sets Redlock's per-node timeout, here and in releaseSet and pttl.
	release(ctx context.Context, k *keys, token, hold any, fair bool, lockTTL time.Duration) (int64, error)
	// releaseSet releases and, if token held the lock, sets key to value for ttl.
	releaseSet(ctx context.Context, k *keys, token, hold any, key string, value []byte, ttl, lockTTL time.Duration) (int64, error)
	// renew fills in ok/err of every item; it returns an error when the whole batch failed.
	renew(ctx context.Context, items []renewItem) error
	// pttl returns the remaining TTL, or ok=false when token does not hold the lock.
	pttl(ctx context.Context, k *keys, token any, lockTTL time.Duration) (time.Duration, bool, error)
	extend(ctx context.Context, k *keys, token any, ttl time.Duration) (bool, error)
	// dequeue takes the waiter of r out of the Redis-side queue (fair mode, permits), handing on a
	// lock or permit a release granted it meanwhile.
	dequeue(ctx context.Context, k *keys, r *acquireReq) error
	// inspect reads the lock without changing anything (Client.Inspect); forceRelease deletes it
	// and publishes msg, or wakes the fair queue's head (Client.ForceRelease).
	inspect(ctx context.Context, k *keys) (LockInfo, error)
	forceRelease(ctx context.Context, k *keys, msg string) (bool, error)
	// router tells where release channels are subscribed.
	router() router
}

// node is the store over one go-redis client.
type node struct {
	rdb         redis.UniversalClient
	s           *scripts
	pubCmd      any // "PUBLISH" or "SPUBLISH", boxed once
	id          any // the client's id, published on release
	cluster     bool
	replicas    int           // WithReplicaAck: replicas that must acknowledge an acquisition or ReleaseSet
	replicaWait time.Duration // and how long to wait for them
	label       any           // "host pid label", recorded with each fresh acquisition (Inspect)
	// fenced: owner checks (renewal, TTL, Extend) also match the acquisition's fence. Off on
	// Redlock's nodes, which may record different fences for one acquisition (the quorum's is
	// written back only where needed).
	fenced bool
}

func newNode(rdb redis.UniversalClient, s *scripts, id string) *node {
	n := &node{rdb: rdb, s: s, pubCmd: any("PUBLISH"), id: id}
	if _, ok := rdb.(*redis.ClusterClient); ok {
		n.cluster = true
		n.pubCmd = any("SPUBLISH")
	}
	return n
}

func ms(d time.Duration) int64 { return int64(d / time.Millisecond) }

// addr names the node in errors.
func (n *node) addr(i int) string {
	if o, ok := n.rdb.(interface{ Options() *redis.Options }); ok {
		return o.Options().Addr
	}
	return "node " + strconv.Itoa(i)
}

func (n *node) acquire(ctx context.Context, k *keys, r *acquireReq) (acquireResult, error) {
	script, keys, args := n.acquireCall(k, r)
	if n.replicas == 0 {
		var v any
		var err error
		if script == n.s.acquire {
			v, err = n.run(ctx, script, n.s.acquireSha, keys, args...).Result()
		} else {
			v, err = script.Run(ctx, n.rdb, keys, args...).Result()
		}
		if err != nil {
			return acquireResult{}, err
		}
		return parseAcquire(v)
	}
	var res acquireResult
	acked, err := n.acked(ctx, script, keys, args, func(v any) (need bool, err error) {
		res, err = parseAcquire(v)
		return err == nil && res.ok, err // only what the caller will hold must reach the replicas
	})
	if err != nil || !res.ok {
		return res, err
	}
	if acked < int64(n.replicas) {
		_, _ = n.release(context.WithoutCancel(ctx), k, r.token, r.hold, r.fair, r.ttl)
		return acquireResult{}, &ackError{what: "the lock", acked: acked, want: int64(n.replicas), wait: n.replicaWait}
	}
	return res, nil
}

// acquireCall returns the script, keys and arguments of an acquire attempt.
func (n *node) acquireCall(k *keys, r *acquireReq) (*redis.Script, []string, []any) {
	if k.sem != nil {
		return n.semAcquireCall(k, r)
	}
	if r.fair {
		args := []any{r.token, ms(r.ttl), ms(r.waiterTTL), r.hold, n.label, n.pubCmd}
		if r.entry != nil {
			args = append(args, r.entry)
		}
		return n.s.acquireFair, k.fair(), args
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
	args := []any{r.token, ttl, r.hold, n.label, floor, r.waiting.arg()}
	if r.entry != nil {
		args = append(args, r.entry)
	}
	if r.guard != nil {
		return n.s.acquireGuarded, r.guard, args
	}
	return n.s.acquire, k.arr[:1], args
}

func parseAcquire(v any) (acquireResult, error) {
	switch x := v.(type) {
	case int64:
		if x > 0 {
			return acquireResult{ok: true, fence: x, holds: 1}, nil
		}
		return acquireResult{busy: true, retryAfter: time.Duration(-1-x) * time.Millisecond}, nil
	case []any:
		if len(x) == 3 && x[1] == "queued" {
			w, _ := x[0].(int64)
			e, _ := x[2].(int64)
			return acquireResult{busy: true, epoch: e, retryAfter: time.Duration(-1-w) * time.Millisecond}, nil
		}
		if len(x) == 1 && x[0] == "nothold" {
			return acquireResult{notHeld: true}, nil
		}
		if len(x) == 2 && x[0] == "guarded" {
			val, _ := x[1].(string)
			return acquireResult{guarded: true, value: val}, nil
		}
		if len(x) == 2 {
			f, ok1 := x[0].(int64)
			h, ok2 := x[1].(int64)
			if ok1 && ok2 {
				return acquireResult{ok: true, fence: f, holds: h}, nil
			}
		}
	}
	return acquireResult{}, errors.New("unexpected acquire reply")
}

func (n *node) release(ctx context.Context, k *keys, token, hold any, fair bool, _ time.Duration) (int64, error) {
	return n.releaseWith(ctx, k, token, hold, fair, n.id)
}

func (n *node) releaseWith(ctx context.Context, k *keys, token, hold any, fair bool, payload any) (int64, error) {
	if k.sem != nil {
		return n.semRelease(ctx, k, token, fair, payload)
	}
	if fair {
		return n.s.releaseFair.Run(ctx, n.rdb, k.fair(), token, n.pubCmd, hold, k.fenceArg()).Int64()
	}
	return n.run(ctx, n.s.release, n.s.releaseSha, k.arr[:1], token, n.pubCmd, payload, hold, k.fenceArg()).Int64()
}

// raiseFence sets the fence counter, and the fence recorded in token's lock, to at least fence
// (Redlock write-back).
func (n *node) raiseFence(ctx context.Context, k *keys, token any, ttl time.Duration, fence int64) error {
	return n.s.raiseFence.Run(ctx, n.rdb, []string{k.arr[0], k.arr[0]}, fence, token, ms(ttl)).Err()
}

// releaseSet returns an *ackError with the holds left when the value was written and the release
// done, but too few replicas acknowledged them (WithReplicaAck).
func (n *node) releaseSet(ctx context.Context, k *keys, token, hold any, key string, value []byte, ttl, _ time.Duration) (int64, error) {
	keys := []string{k.lock(), key}
	args := []any{token, n.pubCmd, value, ms(ttl), n.id, hold, k.fenceArg()}
	if n.replicas == 0 {
		return n.s.releaseSet.Run(ctx, n.rdb, keys, args...).Int64()
	}
	var holds int64
	acked, err := n.acked(ctx, n.s.releaseSet, keys, args, func(v any) (bool, error) {
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

func (n *node) renew(ctx context.Context, items []renewItem) error {
	err := n.renewOnce(ctx, items)
	if err != nil && isNoScript(err) {
		if lerr := n.s.renew.Load(ctx, n.rdb).Err(); lerr != nil {
			return lerr
		}
		if lerr := n.s.sem.renew.Load(ctx, n.rdb).Err(); lerr != nil {
			return lerr
		}
		err = n.renewOnce(ctx, items)
	}
	return err
}

func (n *node) renewOnce(ctx context.Context, items []renewItem) error {
	if n.replicas > 0 {
		return n.renewAcked(ctx, items)
	}
	return n.renewVia(ctx, n.rdb.Pipeline(), items)
}

// renewVia sends the renewal scripts of items in pipe and fills in their outcomes.
func (n *node) renewVia(ctx context.Context, pipe redis.Pipeliner, items []renewItem) error {
	cmds := make([]*redis.Cmd, len(items))
	sha := n.s.renew.Hash()
	for i := range items {
		if items[i].sem {
			cmds[i] = pipe.EvalSha(ctx, n.s.sem.renew.Hash(), items[i].keys, items[i].token, ms(items[i].ttl))
			continue
		}
		cmds[i] = pipe.EvalSha(ctx, sha, items[i].keys, items[i].token, ms(items[i].ttl), n.fenceArg(items[i].fence))
	}
	_, err := pipe.Exec(ctx)
	failed := 0
	for i, c := range cmds {
		v, cerr := c.Int64()
		items[i].ok, items[i].err = v == 1, cerr
		if cerr != nil {
			failed++
			if isNoScript(cerr) {
				return cerr
			}
		}
	}
	if failed < len(items) {
		return nil
	}
	return err
}

// mayHaveRun reports whether a script whose call failed with err may still have run in Redis: it
// was sent, and its reply was lost (a timeout, a cancellation, a broken connection). An error reply
// from Redis means it did not run; neither did a call that found no connection.
func mayHaveRun(err error) bool {
	var ne net.Error
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// fenceArg is the fence an owner check matches (see node.fenced): "" for none.
func (n *node) fenceArg(fence any) any {
	if !n.fenced || fence == nil {
		return ""
	}
	return fence
}

func (n *node) pttl(ctx context.Context, k *keys, token any, _ time.Duration) (time.Duration, bool, error) {
	var v int64
	var err error
	if k.sem != nil {
		v, err = n.s.sem.pttl.Run(ctx, n.rdb, k.arr[:1], token).Int64()
	} else {
		v, err = n.s.pttl.Run(ctx, n.rdb, k.arr[:1], token, n.fenceArg(k.fenceArg())).Int64()
	}
	if err != nil || v == -3 {
		return 0, false, err
	}
	if v < 0 {
		v = 0
	}
	return time.Duration(v) * time.Millisecond, true, nil
}

func (n *node) extend(ctx context.Context, k *keys, token any, ttl time.Duration) (bool, error) {
	script, args := n.s.renew, []any{token, ms(ttl), n.fenceArg(k.fenceArg())}
	if k.sem != nil {
		script, args = n.s.sem.renew, args[:2]
	}
	if n.replicas == 0 {
		v, err := script.Run(ctx, n.rdb, k.renewKeys(), args...).Int64()
		return v == 1, err
	}
	// WithReplicaAck: the extension counts only once the replicas have it (a replica promoted
	// without it would let the lock expire earlier than the holder counts on).
	var v int64
	acked, err := n.acked(ctx, script, k.renewKeys(), args, func(r any) (bool, error) {
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
		return n.semDequeue(ctx, k, r.token)
	}
	return n.s.dequeue.Run(ctx, n.rdb, k.fair(), r.token, n.pubCmd, r.hold, ms(r.ttl), ms(r.waiterTTL), n.label).Err()
}

func (n *node) router() router {
	if c, ok := n.rdb.(*redis.ClusterClient); ok {
		return clusterRouter{rdb: c}
	}
	return plainRouter{rdb: n.rdb}
}
