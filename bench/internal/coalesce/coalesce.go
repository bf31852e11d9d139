package coalesce

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Sender sends commands on a go-redis client, coalescing them into pipelines only while other
// commands are in flight. It is safe for concurrent use.
type Sender struct {
	direct                *redis.Client
	ap                    *redis.AutoPipeliner
	async                 bool  // ap is the deferred face: wait with WaitContext
	threshold             int64 // commands in flight (this one included) from which ap is used
	inflight              atomic.Int64
	sentDirect, sentPiped atomic.Int64
}

type options struct {
	threshold int
	async     bool
	ap        *redis.AutoPipelineOptions
}

// Option configures a Sender.
type Option func(*options)

// Threshold sets how many commands must be in flight, the new one included, before a command is
// handed to the pipeliner (default 2: at least one other). 1 sends everything through the
// pipeliner; values below 1 count as 1.
func Threshold(n int) Option { return func(o *options) { o.threshold = max(n, 1) } }

// ContextBound makes Process wait on the deferred face with the command's context (see the
// package documentation). Without it Process waits on the blocking face.
func ContextBound() Option { return func(o *options) { o.async = true } }

// PipelineOptions sets the pipeliner's options (default: go-redis's defaults for the face).
func PipelineOptions(ao *redis.AutoPipelineOptions) Option { return func(o *options) { o.ap = ao } }

// New returns a Sender over rdb. It uses rdb's own cached AutoPipeliner (the blocking or the
// deferred face), which rdb.Close stops; closing the Sender is closing rdb.
func New(rdb *redis.Client, opts ...Option) (*Sender, error) {
	if rdb == nil {
		return nil, errors.New("coalesce: nil client")
	}
	o := options{threshold: 2}
	for _, f := range opts {
		f(&o)
	}
	var ap *redis.AutoPipeliner
	var err error
	switch {
	case o.async:
		ap, err = rdb.AsyncAutoPipelineWithOptions(o.ap)
	default:
		ap, err = rdb.AutoPipelineWithOptions(o.ap)
	}
	if err != nil {
		return nil, err
	}
	return &Sender{direct: rdb, ap: ap, async: o.async, threshold: int64(o.threshold)}, nil
}

// Process sends cmd and waits for its reply: on the plain client when fewer than the threshold
// of commands are in flight, through the pipeliner otherwise. It returns cmd's error, or (with
// ContextBound) ctx's error when ctx ended first; cmd may then still run.
func (s *Sender) Process(ctx context.Context, cmd redis.Cmder) error {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	if n < s.threshold {
		s.sentDirect.Add(1)
		return s.direct.Process(ctx, cmd)
	}
	s.sentPiped.Add(1)
	if !s.async {
		return s.ap.Process(ctx, cmd)
	}
	if err := ctx.Err(); err != nil {
		cmd.SetErr(err) // not sent, as a plain client does with an ended context
		return err
	}
	return s.ap.Submit(ctx, cmd).WaitContext(ctx)
}

// Stats returns how many commands went straight out and how many through the pipeliner.
func (s *Sender) Stats() (direct, piped int64) { return s.sentDirect.Load(), s.sentPiped.Load() }
