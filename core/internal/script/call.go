package script

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/lockkit/lockkit/core/internal/pipe"
	"github.com/redis/go-redis/v9"
)

// Call is one script call with its command line built once: EVALSHA (EVALSHA_RO for a read-only
// script) HASH NUMKEYS KEYS... ARGV..., HASH as the Sender's servers gave it (sender.go).
type Call struct {
	s    *Script
	argv []any
}

// Runner sends commands: a go-redis client, a pipeline, a connection, a Sender.
type Runner interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// call starts s's command line, for n keys and arguments (keys of them keys), in buf if it fits.
func (s *Script) call(buf []any, keys, n int) Call {
	if cap(buf) < 3+n {
		buf = make([]any, 0, 3+n)
	}
	return Call{s: s, argv: append(buf[:0], s.cmd, nil, keys)}
}

// with is the call of s with these keys and arguments, of which keys are keys.
func (s *Script) with(keys int, argv ...any) Call {
	c := s.call(nil, keys, len(argv))
	c.argv = append(c.argv, argv...)
	return c
}

// Line is room for the command line of a call that a longer-lived holder makes once on its hot
// path (a lock's first acquire attempt, its release), so that the call allocates no argv. Only
// the first call built in a Line takes it (safe for concurrent use); later calls allocate theirs,
// for the command of the first may still be on its way (a call abandoned in a pipeline runs on).
type Line struct {
	taken atomic.Bool
	argv  [12]any
}

// Lines are the Lines of a lock's acquire and release calls, and the release's fence argument.
type Lines struct {
	Acquire, Release Line
	Fence            Sends
}

// Reset frees both rooms for new calls. Only for Lines whose earlier calls were all answered.
func (l *Lines) Reset() {
	clear(l.Acquire.argv[:])
	clear(l.Release.argv[:])
	l.Acquire.taken.Store(false)
	l.Release.taken.Store(false)
	l.Fence.Set(0)
}

// Sends is an integer argument of one call that counts the times its command was written to a
// connection: more than one says the command was sent again (go-redis retried it after a lost
// reply, or replayed a pipeline's batch), so that an earlier run may have done the call's work and
// the reply describes what that run left. A NOSCRIPT reply, which runs nothing, does not count
// (Run). One call at a time: a command sent to several servers at once needs one Sends each.
type Sends struct {
	v   int64
	n   atomic.Int32
	buf [20]byte
}

// Set makes v the argument's value and forgets earlier sends.
func (s *Sends) Set(v int64) {
	s.v = v
	s.n.Store(0)
}

// Replayed reports whether the command was written more than once.
func (s *Sends) Replayed() bool { return s.n.Load() > 1 }

// MarshalBinary writes the value for go-redis (encoding.BinaryMarshaler), counting the send; the
// bytes are valid until the next call (go-redis copies them at once).
func (s *Sends) MarshalBinary() ([]byte, error) {
	s.n.Add(1)
	return strconv.AppendInt(s.buf[:0], s.v, 10), nil
}

// String returns the value (hooks that print commands format their arguments).
func (s *Sends) String() string { return strconv.FormatInt(s.v, 10) }

// take returns l's room for n arguments the first time it is asked, else nil (also for a nil l).
func (l *Line) take(n int) []any {
	if l == nil || n > len(l.argv) || !l.taken.CompareAndSwap(false, true) {
		return nil
	}
	return l.argv[:0]
}

// Keys returns the call's keys.
func (c Call) Keys() []any { return c.argv[3 : 3+c.argv[2].(int)] }

// Cmd returns the call as one command for a pipeline the caller sends (and whose NOSCRIPT reply it
// handles, with Eval): EVALSHA with the script's hash when r is a Sender (see Sender), else EVAL.
func (c Call) Cmd(ctx context.Context, r Runner) *redis.Cmd {
	if _, ok := r.(*Sender); ok && c.s.sha != nil {
		return c.command(ctx, c.s.cmd, c.s.sha)
	}
	return c.Eval(ctx)
}

// command is the call as the command name (EVALSHA, EVAL, or an _RO form) of body: hash or source.
func (c Call) command(ctx context.Context, name, body any) *redis.Cmd {
	c.argv[0], c.argv[1] = name, body
	cmd := redis.NewCmd(ctx, c.argv...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// Eval returns the call as EVAL (EVAL_RO) with the script's source: what to send when the server
// lacks the script (it keeps it for the EVALSHA calls that follow).
func (c Call) Eval(ctx context.Context) *redis.Cmd {
	return Call{argv: slices.Clone(c.argv)}.command(ctx, c.s.eval, c.s.Source)
}

// Run sends the call with r: as EVALSHA when r is a Sender, and again as EVAL if the server lacks
// the script (NOSCRIPT: a restarted server, a promoted replica, a flushed script cache, another
// node of a cluster); as EVAL otherwise. If ctx ended while a pipe.Sender held the call, the
// command returned carries that error (pipe.Abandoned, pipe.Settle), and the call runs on
// without it.
func (c Call) Run(ctx context.Context, r Runner) *redis.Cmd {
	cmd := process(ctx, r, c.Cmd(ctx, r))
	if !IsNoScript(cmd.Err()) { // (only EVALSHA can answer NOSCRIPT)
		return cmd
	}

	for _, a := range c.argv { // (the script ran nowhere: the EVAL below is its first send)
		if s, ok := a.(*Sends); ok {
			s.n.Store(0)
		}
	}
	return process(ctx, r, c.Eval(ctx))
}

// process sends cmd with r. If it was left running (pipe.Abandoned), it returns a command that
// stands for it: one that carries the error, for nothing may read the one that runs (its
// accessors would wait for it).
func process(ctx context.Context, r Runner, cmd *redis.Cmd) *redis.Cmd {
	if err := r.Process(ctx, cmd); pipe.Abandoned(err) {
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(err)
	}
	return cmd
}

// IsNoScript reports whether err is Redis's NOSCRIPT reply.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// absent reports whether the optional argument v is not given: nil or "".
func absent(v any) bool {
	s, ok := v.(string)
	return v == nil || ok && s == ""
}
