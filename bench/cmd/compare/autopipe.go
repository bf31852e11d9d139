package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockkit/lockkit/bench/internal/coalesce"
	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// Rows for issue #31: the raw floor and lockkit with go-redis's automatic pipelining (see
// bench/AUTOPIPELINE.md). The AutoPipeliner is the client's own cached blocking face, which the
// rig's rdb.Close stops; the rig's counting hook sees its batches (one round trip each).

const (
	rawAutoName          = "raw floor (auto-pipelined)"
	rawCoalescedName     = "raw floor (coalesced when busy)"
	lockkitPipelinedName = "lockkit (pipelined)"
	pipelineThreshold    = 8 // WithPipelining's in the pipelined rows (the docs' recommendation)
)

// rawAutoConfig is the raw floor's typed calls sent through rdb.AutoPipeline().
func rawAutoConfig() config {
	return config{name: rawAutoName, family: "raw", nodes: 1,
		settings: "the raw floor's SetNX and Script.Run, sent through rdb.AutoPipeline() (go-redis's blocking face, default options)",
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			ap, err := rdbs[0].AutoPipeline()
			if err != nil {
				return nil, err
			}
			return newRaw(typedOps{c: ap, del: redis.NewScript(rawRelease)}, ttl), nil
		}}
}

// rawCoalescedConfig is the raw floor's commands, built and sent with Process through the
// prototype sender: straight out for a lone caller, through the AutoPipeliner while others are in
// flight.
func rawCoalescedConfig() config {
	return config{name: rawCoalescedName, family: "raw", nodes: 1,
		settings: "the raw floor's commands built by hand and sent with Process through bench/internal/coalesce: on the plain client when no other command is in flight, through rdb.AutoPipeline() otherwise",
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			snd, err := coalesce.New(rdbs[0])
			if err != nil {
				return nil, err
			}
			return newRaw(newProcessOps(snd), ttl), nil
		}}
}

// lockkitPipelinedConfig is lockkit with core.WithPipelining(n): its commands go through the
// go-redis client's own deferred-face AutoPipeliner while at least n are in flight, straight out
// otherwise.
func lockkitPipelinedConfig(n int, fair bool) config {
	name := lockkitPipelinedName
	if n != pipelineThreshold {
		name = fmt.Sprintf("lockkit (pipelined, %d)", n)
	}
	var opts []core.AcquireOption
	acq := "Acquire(ctx, key, ttl)"
	if fair {
		name, opts, acq = "lockkit fair (pipelined)", []core.AcquireOption{core.Fair()}, "Acquire(ctx, key, ttl, core.Fair())"
	}
	return config{name: name, family: "lockkit", nodes: 1,
		settings: fmt.Sprintf("core.New(rdb, core.WithPipelining(%d)); %s: coalesced while %d or more of the client's commands are in flight", n, acq, n),
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			c, err := core.New(rdbs[0], core.WithPipelining(n))
			return &lockkitImpl{c: c, ttl: ttl, opts: opts, bg: context.Background()}, err
		}}
}

// lockkitRedlockPipelinedConfig is lockkit Redlock with each node's traffic coalesced.
func lockkitRedlockPipelinedConfig() config {
	return config{name: "lockkit Redlock (pipelined)", family: "lockkit", nodes: 3,
		settings: fmt.Sprintf("core.NewRedlock(3 nodes, core.WithPipelining(%d)) (node timeout from the round trips, TTL/20 to TTL/3)", pipelineThreshold),
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			nodes := make([]redis.UniversalClient, len(rdbs))
			for i, r := range rdbs {
				nodes[i] = r
			}
			c, err := core.NewRedlock(nodes, core.WithPipelining(pipelineThreshold))
			return &lockkitImpl{c: c, ttl: ttl, bg: context.Background()}, err
		}}
}

// processor sends one command and waits for its reply.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// processOps is the raw floor as commands built by hand and sent with Process: the shape of
// lockkit's script calls. The wire commands are the typed ones' (SetNX, Script.Run).
type processOps struct {
	p        processor
	src, sha string
}

func newProcessOps(p processor) processOps {
	return processOps{p: p, src: rawRelease, sha: redis.NewScript(rawRelease).Hash()}
}

// setNXArgs are SetNX's arguments for a non-zero ttl: EX in whole seconds, PX otherwise.
func setNXArgs(key, token string, ttl time.Duration) []any {
	if ttl < time.Second || ttl%time.Second != 0 {
		return []any{"set", key, token, "px", int64(ttl / time.Millisecond), "nx"}
	}
	return []any{"set", key, token, "ex", int64(ttl / time.Second), "nx"}
}

func (o processOps) setNX(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	cmd := redis.NewBoolCmd(ctx, setNXArgs(key, token, ttl)...)
	if err := o.p.Process(ctx, cmd); err != nil {
		return false, err
	}
	return cmd.Val(), nil
}

func (o processOps) release(ctx context.Context, key, token string) (int64, error) {
	cmd := redis.NewCmd(ctx, "evalsha", o.sha, 1, key, token)
	cmd.SetFirstKeyPos(3)
	err := o.p.Process(ctx, cmd)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		cmd = redis.NewCmd(ctx, "eval", o.src, 1, key, token)
		cmd.SetFirstKeyPos(3)
		err = o.p.Process(ctx, cmd)
	}
	if err != nil {
		return 0, err
	}
	return cmd.Int64()
}
