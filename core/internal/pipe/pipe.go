package pipe

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// MaxQueued bounds the commands a pipeliner the Sender creates accepts at once; a command beyond
// it is sent directly.
const MaxQueued = 8192

// Sender sends commands on one go-redis client. It is safe for concurrent use.
type Sender struct {
	rdb       redis.UniversalClient
	threshold int64 // commands in flight (the new one included) from which the pipeliner is used
	inflight  atomic.Int64
	ap        atomic.Pointer[redis.AutoPipeliner]
	opts      *redis.AutoPipelineOptions
	direct    atomic.Int64 // commands sent straight out
	piped     atomic.Int64 // commands sent through the pipeliner
	lanes     lanes        // picks the policy above a threshold > 1 (see lanes.go)
}

// New returns a Sender over rdb that coalesces a command when at least threshold commands are in
// flight (1, or less: every command). Only a *redis.Client (plain or Sentinel failover) and a
// *redis.ClusterClient have a pipeliner; over any other client every command goes straight out.
func New(rdb redis.UniversalClient, threshold int) *Sender {
	// The pipeliner's options, when the Sender is the first to ask the client for it: go-redis's
	// defaults (one ordered batch stream) with a bounded queue.
	o := redis.DefaultAutoPipelineOptions()
	o.MaxQueuedCommands = MaxQueued
	return &Sender{rdb: rdb, threshold: int64(max(threshold, 1)), opts: o}
}

// pipeliner returns the client's deferred-face pipeliner, or nil when it has none. (go-redis
// builds it once, under its own lock, for concurrent first callers too.)
func (s *Sender) pipeliner() *redis.AutoPipeliner {
	if ap := s.ap.Load(); ap != nil {
		return ap
	}
	var ap *redis.AutoPipeliner
	var err error
	switch c := s.rdb.(type) {
	case *redis.Client:
		ap, err = c.AsyncAutoPipelineWithOptions(s.opts)
	case *redis.ClusterClient:
		ap, err = c.AsyncAutoPipelineWithOptions(s.opts)
	}
	if err != nil || ap == nil {
		return nil // (a closed client: the direct send says so)
	}
	s.ap.Store(ap)
	return ap
}

// Process sends cmd and waits for its reply, or for ctx to end. It returns cmd's error, or an
// error matching ctx's when ctx ended while cmd was queued or in flight: cmd then still runs,
// and must not be read (its accessors would wait for it); Settle waits for it.
func (s *Sender) Process(ctx context.Context, cmd redis.Cmder) error {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	var ap *redis.AutoPipeliner
	if n >= s.threshold {
		ap = s.pipeliner()
	}
	if ap == nil {
		s.direct.Add(1)
		return s.rdb.Process(ctx, cmd)
	}
	if err := ctx.Err(); err != nil {
		cmd.SetErr(err) // not sent, as the client does with an ended context
		return err
	}
	if s.threshold == 1 { // (every command promised to the pipeliner: no lanes, see lanes.go)
		return s.submit(ctx, ap, cmd)
	}

	// Above the threshold, the lanes' policy: through the pipeliner, or straight out while at
	// least half of the commands in flight are already in it. The lanes count the commands done.
	var err error
	if s.lanes.splitNow(n) {
		s.direct.Add(1)
		err = s.rdb.Process(ctx, cmd)
	} else {
		s.lanes.piped.Add(1)
		err = s.submit(ctx, ap, cmd)
		s.lanes.piped.Add(-1)
	}
	s.lanes.done()
	return err
}

// submit sends cmd through the pipeliner ap and waits for its reply, or for ctx to end.
func (s *Sender) submit(ctx context.Context, ap *redis.AutoPipeliner, cmd redis.Cmder) error {
	f := ap.Submit(ctx, cmd)
	err := f.WaitContext(ctx)
	left := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) // the caller stopped waiting
	if !left && (errors.Is(err, redis.ErrAutoPipelineQueueFull) || errors.Is(err, redis.ErrClosed)) {
		// Not sent. A closed pipeliner (its user closed it) is asked for afresh next time; a
		// closed client says so on the direct send.
		if errors.Is(err, redis.ErrClosed) {
			s.ap.CompareAndSwap(ap, nil)
		}
		s.direct.Add(1)
		cmd.SetErr(nil)
		return s.rdb.Process(ctx, cmd)
	}

	s.piped.Add(1)
	if left {
		return &abandoned{err: err, f: f}
	}
	return err
}

// abandoned is the error of a command whose caller stopped waiting: it wraps the context's error.
type abandoned struct {
	err error
	f   redis.AutoFuture
}

func (a *abandoned) Error() string { return a.err.Error() }
func (a *abandoned) Unwrap() error { return a.err }

// Abandoned reports whether err (or an error it wraps) says that its command was left running
// when its caller's context ended.
func Abandoned(err error) bool {
	_, ok := errors.AsType[*abandoned](err)
	return ok
}

// Settle waits until the command whose call failed with err has run, when err says it was left
// running (Abandoned; else it returns at once), or until ctx ends: what follows reaches Redis after.
func Settle(ctx context.Context, err error) {
	if a, ok := errors.AsType[*abandoned](err); ok {
		_ = a.f.WaitContext(ctx)
	}
}
