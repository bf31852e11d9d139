package chaos_test

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// The safety checker's hooks: core's Hook and a go-redis hook on every client's connections feed
// the history (see safety_history_test.go).

// coreHook records attempts, renewals and losses into the calls their contexts carry.
func coreHook() core.Hook {
	return core.Hook{
		Acquired: memberCtx,
		Attempt: func(ctx context.Context, _ core.WaitInfo) {
			if c := callOf(ctx); c != nil {
				at := c.h.now()
				c.mu.Lock()
				c.prev, c.attempt = c.attempt, at
				c.mu.Unlock()
			}
		},
		// Core reports a renewal once per lock, on its outermost open hold (the one the history
		// follows for the token's renewals).
		Renewed: func(lctx context.Context, info core.HoldInfo) {
			if c := callOf(lctx); c != nil {
				sent := info.Start.Sub(c.h.start)
				c.mu.Lock()
				if info.Renewed {
					c.hold.Renewed = max(c.hold.Renewed, sent)
				}
				if sent > c.hold.Tried {
					c.hold.Tried, c.hold.TryErr = sent, ""
					if info.Err != nil {
						c.hold.TryErr = info.Err.Error()
					} else if !info.Renewed {
						c.hold.TryErr = "not renewed"
					}
				}
				c.mu.Unlock()
			}
		},
		Lost: func(lctx context.Context, info core.HoldInfo) {
			if c := callOf(lctx); c != nil {
				// The hook runs after the hold's context was cancelled and before the hold is
				// given back (core's hook doc): it says when the loss was reported, not that the
				// context was live. A context still live here would be seen (Live) and judged by
				// the oracle.
				at := c.h.now()
				live := lctx.Err() == nil
				var le *core.LostError
				why := "?"
				if errors.As(info.Err, &le) {
					why = le.Reason
				}
				c.mu.Lock()
				c.hold.LostAt, c.hold.Why = at, why
				if live {
					c.hold.Live = max(c.hold.Live, at)
				}
				c.mu.Unlock()
			}
		},
	}
}

// redisHook is a go-redis hook on one client slot's connection(s): it notes the token of each
// acquire call and the first release send of a call, and records every command that failed or took
// longer than recordCmd as a span (see healthy: a path is unhealthy when one was too slow).
type redisHook struct {
	h      *history
	client int
}

// recordCmd is how long a command may take before it is recorded (as a "slow" span). The oracle
// calls a path healthy when no command took longer than a sixth of the shortest TTL in play (20 ms
// TTLs: 3.3 ms), so it must see every command that slow: when commands were recorded from 20 ms
// (before issue 27), commands of 8 to 20 ms, common under -race on a busy machine, went unseen.
const recordCmd = 2 * time.Millisecond

// slowCmd is how long a command may take before it counts as slow (a sign of an unhealthy path)
// where a check needs no finer threshold.
const slowCmd = 20 * time.Millisecond

// DialHook implements redis.Hook.
func (r redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (r redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		t0 := r.h.now()
		if c := callOf(ctx); c != nil {
			r.script(c, cmd)
		}
		err := next(ctx, cmd)
		r.done(t0, cmd.Name(), err)
		if err != nil && !errors.Is(err, redis.Nil) {
			if tok, ok := releaseToken(cmd); ok {
				r.h.mu.Lock()
				r.h.releaseErr[tok] = true
				r.h.mu.Unlock()
			}
		}
		return err
	}
}

// releaseToken returns the token of a release script, the kind a give-back sends: a permit's
// (sem_release.lua: 7 keys, then the token and the publish command) or a lock's (release.lua: the
// lock's key and an optional set key, then the token, the fence and the message, which names the
// Client: "c:…", core/internal/wait.ClientIDPrefix). An acquisition's third argument is its label,
// never "c:…".
func releaseToken(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	if name := strings.ToLower(cmd.Name()); (name != "eval" && name != "evalsha") || len(args) < 3 {
		return "", false
	}
	nk, ok := args[2].(int)
	if !ok || len(args) < 3+nk+3 {
		return "", false
	}
	tok, _ := args[3+nk].(string)
	if tok == "" {
		return "", false
	}
	if nk == 7 {
		pub, _ := args[4+nk].(string)
		return tok, pub == "PUBLISH" || pub == "SPUBLISH"
	}
	msg, _ := args[5+nk].(string)
	return tok, (nk == 1 || nk == 2) && strings.HasPrefix(msg, "c:")
}

// ProcessPipelineHook implements redis.Hook: renewals travel in pipelines; it notes which tokens
// have a renewal in flight, so that the workload can race an Extend against one.
func (r redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var toks []string
		for _, cmd := range cmds {
			if a := cmd.Args(); (len(a) == 6 || len(a) == 7) && a[2] == any(1) { // a lock's renewal: token, TTL (and its fence)
				if tok, ok := a[4].(string); ok {
					toks = append(toks, tok)
				}
			} else if len(a) == 10 && a[2] == any(4) { // a permit's (or read-write) renewal: permits, limits, fences, lock; token, TTL, fence
				if tok, ok := a[7].(string); ok {
					toks = append(toks, tok)
				}
			}
		}
		r.renewing(toks, 1)
		t0 := r.h.now()
		err := next(ctx, cmds)
		r.done(t0, "pipeline", err)
		r.renewing(toks, -1)
		return err
	}
}

func (r redisHook) renewing(toks []string, d int) {
	r.h.mu.Lock()
	for _, tok := range toks {
		if r.h.renewing[tok] += d; r.h.renewing[tok] == 0 {
			delete(r.h.renewing, tok)
		}
	}
	r.h.mu.Unlock()
}

func (r redisHook) done(t0 time.Duration, name string, err error) {
	t1 := r.h.now()
	if err != nil && errors.Is(err, redis.Nil) || err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		err = nil
	}
	if err == nil && t1-t0 < recordCmd {
		return
	}
	s := span{Kind: "slow", Target: r.client, From: t0, To: t1, Detail: name}
	if err != nil {
		s.Kind, s.Detail = "error", name+": "+err.Error()
	}
	r.h.mu.Lock()
	r.h.slow = append(r.h.slow, s)
	r.h.mu.Unlock()
}

// script notes the token of a call's acquire script (acquireToken).
func (r redisHook) script(c *call, cmd redis.Cmder) {
	tok, ok := acquireToken(cmd)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok == "" {
		c.tok = tok
	}
}

// acquireToken returns the token of an acquire script: its first argument. Not a release or a
// dequeue: their second argument is the publish command (release_all, release_fair, dequeue, a
// permit's), or their third the message naming the Client, "c:…" (release.lua). A permit's has the
// semaphore's PREFIX{NAME}:permits first and at least 4 keys and 4 arguments (its renewal and PTTL
// have fewer keys). A fair lock's (acquire_fair.lua) has 3 keys and at least 6 arguments; a lock's
// (acquire.lua: token, TTL, the holder's label; acquire_all.lua: token, TTL, hold "0") a string
// third (a renewal's is its fence, a number or ""; the Redlock write-back's first its fence).
func acquireToken(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	name := strings.ToLower(cmd.Name())
	if (name != "eval" && name != "evalsha") || len(args) < 3 {
		return "", false
	}
	nk, ok := args[2].(int)
	if !ok || nk == 0 || len(args) < 3+nk+3 {
		return "", false
	}
	keys, argv := args[3:3+nk], args[3+nk:]
	tok, _ := argv[0].(string)
	pub, _ := argv[1].(string)
	third, _ := argv[2].(string)
	k0, _ := keys[0].(string)
	switch {
	case tok == "" || pub == "PUBLISH" || pub == "SPUBLISH" || strings.HasPrefix(third, "c:"):
		return "", false
	case strings.HasSuffix(k0, "}:permits"):
		return tok, nk >= 4 && len(argv) >= 4
	case !strings.HasSuffix(k0, "}"):
		return "", false
	case nk == 3 && len(argv) >= 6:
		return tok, true
	}
	return tok, third != ""
}
