package chaos_test

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// errRefused is what refuseKeys answers instead of Redis.
var errRefused = errors.New("chaos: command refused (renewals failing)")

// refuseKeys is a go-redis hook on a client of the starved child: every command or pipeline that
// names one of its keys fails at once without being sent, as if Redis were unreachable. The child
// adds a hold's key once it holds it, so that its renewals fail and the watchdog must end the hold
// by its validity deadline, on timers that run late (the child is starved).
type refuseKeys struct {
	mu   sync.Mutex
	keys map[string]bool // at most maxRefused
}

// maxRefused caps the keys refused at once (the child refuses a few holds at a time).
const maxRefused = 64

// add refuses key from now on (false if maxRefused keys are refused already).
func (r *refuseKeys) add(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[string]bool{}
	}
	if len(r.keys) >= maxRefused {
		return false
	}
	r.keys[key] = true
	return true
}

// remove lets key's commands through again.
func (r *refuseKeys) remove(key string) {
	r.mu.Lock()
	delete(r.keys, key)
	r.mu.Unlock()
}

// names reports whether one of cmds names a refused key.
func (r *refuseKeys) names(cmds ...redis.Cmder) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		for _, a := range c.Args() {
			if s, ok := a.(string); ok && r.keys[s] {
				return true
			}
		}
	}
	return false
}

// DialHook implements redis.Hook.
func (r *refuseKeys) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (r *refuseKeys) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if r.names(cmd) {
			cmd.SetErr(errRefused)
			return errRefused
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook: renewals travel in pipelines (refused whole: the
// client that refuses holds nothing else).
func (r *refuseKeys) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if r.names(cmds...) {
			for _, c := range cmds {
				c.SetErr(errRefused)
			}
			return errRefused
		}
		return next(ctx, cmds)
	}
}
