package script

import (
	"context"
	"strings"

	"github.com/lockkit/lockkit/core/internal/pipe"
	"github.com/redis/go-redis/v9"
)

// Call is one script call with its command line built once: EVALSHA (EVALSHA_RO for a read-only
// script) SHA NUMKEYS KEYS... ARGV...
type Call struct {
	s    *Script
	argv []any
}

// Runner sends commands: a go-redis client, a pipeline, a connection.
type Runner interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// call starts the command line of s with room for n keys and arguments; keys is how many keys.
func (s *Script) call(keys, n int) Call {
	argv := make([]any, 3, 3+n)
	argv[0], argv[1], argv[2] = s.head[0], s.head[1], keys
	return Call{s: s, argv: argv}
}

// Script returns the script called.
func (c Call) Script() *Script { return c.s }

// Keys returns the call's keys.
func (c Call) Keys() []any { return c.argv[3 : 3+c.argv[2].(int)] }

// Cmd returns the call as a command (for a pipeline: a NOSCRIPT reply is then the caller's to
// handle, with Eval).
func (c Call) Cmd(ctx context.Context) *redis.Cmd {
	cmd := redis.NewCmd(ctx, c.argv...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// Eval returns the call as EVAL (EVAL_RO) with the script's source: what to send when the server
// lacks the script (it keeps it for the EVALSHA calls that follow).
func (c Call) Eval(ctx context.Context) *redis.Cmd {
	argv := make([]any, len(c.argv))
	copy(argv, c.argv)
	argv[0], argv[1] = "eval", c.s.Source
	if c.s.ReadOnly {
		argv[0] = "eval_ro"
	}
	cmd := redis.NewCmd(ctx, argv...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// Run sends the call with r and, if the server lacks the script (NOSCRIPT: a restarted server, a
// newly promoted replica, a flushed script cache), sends it again as EVAL. If r is a pipe.Sender
// and ctx ended while the call was still queued or in flight, the command returned carries that
// error (pipe.Abandoned, pipe.Settle), and the call runs on without it.
func (c Call) Run(ctx context.Context, r Runner) *redis.Cmd {
	cmd := c.Cmd(ctx)
	if err := r.Process(ctx, cmd); pipe.Abandoned(err) {
		return abandoned(ctx, err)
	}
	if IsNoScript(cmd.Err()) {
		cmd = c.Eval(ctx)
		if err := r.Process(ctx, cmd); pipe.Abandoned(err) {
			return abandoned(ctx, err)
		}
	}
	return cmd
}

// abandoned is a command that stands for one left running: it carries err, and nothing reads the
// one that runs (its accessors would wait for it).
func abandoned(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// IsNoScript reports whether err is Redis's NOSCRIPT reply.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// opt appends the optional trailing key or argument v, if given.
func (c *Call) opt(v any) {
	switch x := v.(type) {
	case nil:
		return
	case string:
		if x == "" {
			return
		}
	}
	c.argv = append(c.argv, v)
}
