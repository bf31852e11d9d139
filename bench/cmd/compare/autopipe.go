package main

import (
	"context"
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
	lockkitAutoName      = "lockkit over AutoPipeline()"
	lockkitFairAutoName  = "lockkit fair over AutoPipeline()"
	lockkitCoalescedName = "lockkit (coalesced when busy)"
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

// lockkitAutoConfig hands lockkit the AutoPipeliner unchanged: core.New takes a UniversalClient.
func lockkitAutoConfig() config {
	return config{name: lockkitAutoName, family: "lockkit", nodes: 1,
		settings: "ap, _ := rdb.AutoPipeline(); core.New(ap) with defaults: every command lockkit sends goes through the pipeliner (subscriptions and pipelines are delegated to rdb)",
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			ap, err := rdbs[0].AutoPipeline()
			if err != nil {
				return nil, err
			}
			c, err := core.New(ap)
			return &lockkitImpl{c: c, ttl: ttl, bg: context.Background()}, err
		}}
}

func lockkitFairAutoConfig() config {
	return config{name: lockkitFairAutoName, family: "lockkit", nodes: 1,
		settings: "core.New(ap) as above; Acquire(ctx, key, ttl, core.Fair())",
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			ap, err := rdbs[0].AutoPipeline()
			if err != nil {
				return nil, err
			}
			c, err := core.New(ap)
			return &lockkitImpl{c: c, ttl: ttl, opts: []core.AcquireOption{core.Fair()}, bg: context.Background()}, err
		}}
}

// lockkitCoalescedConfig gives lockkit a plain client whose Process goes through the prototype
// sender. lockkit sends its non-fair acquire and release as built commands with Process, so the
// hot path is coalesced when busy; everything else (fair mode, permits, Inspect, the watchdog's
// pipelines, the subscriber) stays on the plain client. A preview of the design, not a way to use
// lockkit: core does not recognise the wrapper as a *redis.Client (WithReplicaAck would send
// WAIT in a pipeline instead of on the script's connection).
func lockkitCoalescedConfig() config {
	return config{name: lockkitCoalescedName, family: "lockkit", nodes: 1,
		settings: "core.New(rdb wrapped so that Process goes through bench/internal/coalesce): the non-fair acquire and release (EVALSHA via Process) go straight out for a lone caller, through rdb.AutoPipeline() while others are in flight",
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			snd, err := coalesce.New(rdbs[0])
			if err != nil {
				return nil, err
			}
			c, err := core.New(processRouted{Client: rdbs[0], snd: snd})
			return &lockkitImpl{c: c, ttl: ttl, bg: context.Background()}, err
		}}
}

// processRouted is a plain client whose Process goes through a coalescing sender; its typed
// methods, pipelines and subscriptions are the plain client's.
type processRouted struct {
	*redis.Client
	snd *coalesce.Sender
}

func (r processRouted) Process(ctx context.Context, cmd redis.Cmder) error {
	return r.snd.Process(ctx, cmd)
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
