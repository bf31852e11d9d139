package main

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The two-script floor (issue #31): a lock that runs exactly the commands lockkit's scripts run
// when uncontended — acquire GET + TIME + SET, release GET + SET, each in one script — and nothing
// else: no fence, hold list, release chain, waiter flag or label. What any design with a script
// per acquire and per release pays at least, side by side with lockkit in the same run.
const (
	twoScriptName     = "two-script floor"
	twoScriptAutoName = "two-script floor (auto-pipelined)"
)

// twoScriptAcquire takes a missing or free (empty) key; twoScriptRelease frees it when it holds the
// token (a free value, not a DEL, as lockkit's release writes one).
const (
	twoScriptAcquire = `local v = redis.call('GET', KEYS[1])
if v and v ~= '' then return 0 end
redis.call('TIME')
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`
	twoScriptRelease = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], '', 'PX', '10000')
return 1`
)

// scriptOps is the two-script floor's acquire and release, as typed Script.Run calls.
type scriptOps struct {
	c        redis.Cmdable
	acq, rel *redis.Script
}

func newScriptOps(c redis.Cmdable) scriptOps {
	return scriptOps{c: c, acq: redis.NewScript(twoScriptAcquire), rel: redis.NewScript(twoScriptRelease)}
}

func (o scriptOps) setNX(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	n, err := o.acq.Run(ctx, o.c, []string{key}, token, ttl.Milliseconds()).Int64()
	return n == 1, err
}

func (o scriptOps) release(ctx context.Context, key, token string) (int64, error) {
	return o.rel.Run(ctx, o.c, []string{key}, token).Int64()
}

// twoScriptConfig is the two-script floor, on the plain client or (auto) through
// rdb.AutoPipeline(), as the raw floor's rows are.
func twoScriptConfig(auto bool) config {
	name, via := twoScriptName, "on the plain client"
	if auto {
		name, via = twoScriptAutoName, "sent through rdb.AutoPipeline() (default options)"
	}
	return config{name: name, family: "raw", nodes: 1,
		settings: "acquire = EVALSHA running GET + TIME + SET PX, release = EVALSHA running GET + SET PX (lockkit's uncontended commands, none of its work), " + via,
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			if !auto {
				return newRaw(newScriptOps(rdbs[0]), ttl), nil
			}
			ap, err := rdbs[0].AutoPipeline()
			if err != nil {
				return nil, err
			}
			return newRaw(newScriptOps(ap), ttl), nil
		}}
}
