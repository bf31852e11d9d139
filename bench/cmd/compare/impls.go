package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// impl is one library under one configuration.
type impl interface {
	// critical acquires key, waiting the library's way, runs body (if not nil) and releases. When
	// the library gives up waiting (redsync after its tries, redislock without retries or at its
	// retry deadline) critical calls it again, as a caller that needs the critical section would;
	// gaveUp counts those calls. It returns ctx's error when ctx ends the wait.
	critical(ctx context.Context, key string, body func()) (gaveUp int, err error)
	close() error
}

// config is a row of the tables: a library and its exact settings.
type config struct {
	name     string
	family   string // "lockkit", "raw", "redsync", "redislock"
	settings string
	nodes    int  // Redis servers used (3: Redlock)
	anchor   bool // a library users would pick instead of lockkit
	make     func(rdbs []*redis.Client, ttl time.Duration) (impl, error)
}

// newToken is the raw floor's owner token: 16 random bytes, hex (lockkit's format).
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ---- lockkit

type lockkitImpl struct {
	c    *core.Client
	ttl  time.Duration
	opts []core.AcquireOption
	bg   context.Context
}

func lockkitConfig() config {
	return config{name: "lockkit", family: "lockkit", nodes: 1,
		settings: "core.New(rdb) with defaults; Acquire(ctx, key, ttl) waits (pub/sub wake-up, fallback backoff 20 ms–1 s)",
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			c, err := core.New(rdbs[0])
			return &lockkitImpl{c: c, ttl: ttl, bg: context.Background()}, err
		}}
}

// lockkitFairConfig is lockkit's fair mode: waiters queue in Redis and are served in arrival order.
func lockkitFairConfig() config {
	return config{name: "lockkit fair", family: "lockkit", nodes: 1,
		settings: "core.New(rdb) with defaults; Acquire(ctx, key, ttl, core.Fair()): waiters queue FIFO in Redis",
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			c, err := core.New(rdbs[0])
			return &lockkitImpl{c: c, ttl: ttl, opts: []core.AcquireOption{core.Fair()}, bg: context.Background()}, err
		}}
}

func lockkitRedlockConfig() config {
	return config{name: "lockkit Redlock", family: "lockkit", nodes: 3,
		settings: "core.NewRedlock(3 nodes) with defaults (node timeout from the round trips, TTL/20 to TTL/3)",
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			nodes := make([]redis.UniversalClient, len(rdbs))
			for i, r := range rdbs {
				nodes[i] = r
			}
			c, err := core.NewRedlock(nodes)
			return &lockkitImpl{c: c, ttl: ttl, bg: context.Background()}, err
		}}
}

func (l *lockkitImpl) critical(ctx context.Context, key string, body func()) (int, error) {
	lk, err := l.c.Acquire(ctx, key, l.ttl, l.opts...)
	if err != nil {
		return 0, err
	}
	if body != nil {
		body()
	}
	return 0, lk.Release(l.bg)
}

func (l *lockkitImpl) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.c.Close(ctx)
}

// ---- raw floor: SET NX PX, then an EVALSHA compare-and-delete

const rawRelease = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`

// floorOps sends the raw floor's two commands: the typed go-redis calls (on a plain client or an
// AutoPipeliner) or commands built by hand and sent with Process (see autopipe.go).
type floorOps interface {
	setNX(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
	release(ctx context.Context, key, token string) (int64, error)
}

// typedOps is the raw floor as users write it: SetNX, then Script.Run (EVALSHA, EVAL on NOSCRIPT).
type typedOps struct {
	c   redis.Cmdable
	del *redis.Script
}

func (o typedOps) setNX(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return o.c.SetNX(ctx, key, token, ttl).Result()
}

func (o typedOps) release(ctx context.Context, key, token string) (int64, error) {
	return o.del.Run(ctx, o.c, []string{key}, token).Int64()
}

type rawImpl struct {
	ops   floorOps
	ttl   time.Duration
	retry time.Duration
	bg    context.Context
}

func rawConfig() config {
	return config{name: "raw floor", family: "raw", nodes: 1,
		settings: "SET key token NX PX ttl; on failure sleep 1 ms and SET again; release = EVALSHA GET/compare/DEL",
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			return newRaw(typedOps{c: rdbs[0], del: redis.NewScript(rawRelease)}, ttl), nil
		}}
}

func newRaw(ops floorOps, ttl time.Duration) *rawImpl {
	return &rawImpl{ops: ops, ttl: ttl, retry: time.Millisecond, bg: context.Background()}
}

func (r *rawImpl) critical(ctx context.Context, key string, body func()) (int, error) {
	token := newToken()
	for {
		ok, err := r.ops.setNX(ctx, key, token, r.ttl)
		if err != nil {
			return 0, err
		}
		if ok {
			break
		}
		if err := sleepCtx(ctx, r.retry); err != nil {
			return 0, err
		}
	}
	if body != nil {
		body()
	}
	n, err := r.ops.release(r.bg, key, token)
	if err == nil && n != 1 {
		err = fmt.Errorf("raw: lock %s was not ours at release", key)
	}
	return 0, err
}

func (r *rawImpl) close() error { return nil }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ---- go-redsync/redsync v4

type redsyncImpl struct {
	rs   *redsync.Redsync
	opts []redsync.Option
	bg   context.Context
}

// redsyncConfig builds a redsync row; extra are its retry options, described by settings.
func redsyncConfig(name string, nodes int, settings string, extra ...redsync.Option) config {
	return config{name: name, family: "redsync", nodes: nodes, anchor: true, settings: settings,
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			pools := make([]redsyncredis.Pool, len(rdbs))
			for i, r := range rdbs {
				pools[i] = goredis.NewPool(r)
			}
			opts := append([]redsync.Option{redsync.WithExpiry(ttl)}, extra...)
			return &redsyncImpl{rs: redsync.New(pools...), opts: opts, bg: context.Background()}, nil
		}}
}

// redsyncDefaults: 32 tries, 50–250 ms random delay, expiry = the common TTL (8 s, its default).
func redsyncDefaults(nodes int) config {
	name := "redsync (defaults)"
	if nodes > 1 {
		name = fmt.Sprintf("redsync %d nodes (defaults)", nodes)
	}
	return redsyncConfig(name, nodes, "NewMutex(key) per critical section, defaults: 32 tries, random 50–250 ms retry delay")
}

// redsyncTuned is the retry setting a pilot sweep found best (lowest mean wait p99 over both
// holds); every full run re-checks the choice in its sweep section (see sweepConfigs).
func redsyncTuned(nodes int) config {
	name := "redsync (tuned)"
	if nodes > 1 {
		name = fmt.Sprintf("redsync %d nodes (tuned)", nodes)
	}
	return redsyncConfig(name, nodes, "WithTries(math.MaxInt32), WithRetryDelay(1ms)",
		redsync.WithTries(math.MaxInt32), redsync.WithRetryDelay(time.Millisecond))
}

func (r *redsyncImpl) critical(ctx context.Context, key string, body func()) (int, error) {
	m := r.rs.NewMutex(key, r.opts...) // a Mutex is not goroutine-safe: one per critical section
	gave := 0
	for {
		err := m.LockContext(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return gave, ctx.Err()
		}
		var taken *redsync.ErrTaken
		if !errors.Is(err, redsync.ErrFailed) && !errors.As(err, &taken) {
			return gave, err
		}
		gave++
	}
	if body != nil {
		body()
	}
	ok, err := m.UnlockContext(r.bg)
	if err == nil && !ok {
		err = fmt.Errorf("redsync: unlock of %s failed", key)
	}
	return gave, err
}

func (r *redsyncImpl) close() error { return nil }

// ---- bsm/redislock

type redislockImpl struct {
	c        *redislock.Client
	ttl      time.Duration
	strategy func() redislock.RetryStrategy // nil: the default (no retry)
	bg       context.Context
}

func redislockConfig(name, settings string, strategy func() redislock.RetryStrategy) config {
	return config{name: name, family: "redislock", nodes: 1, anchor: true, settings: settings,
		make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
			return &redislockImpl{c: redislock.New(rdbs[0]), ttl: ttl, strategy: strategy, bg: context.Background()}, nil
		}}
}

func redislockDefaults() config {
	return redislockConfig("redislock (defaults)",
		"Obtain(ctx, key, ttl, nil): no retry; the harness calls Obtain again at once until it succeeds", nil)
}

// redislockTuned is the retry setting a pilot sweep found best (lowest mean wait p99 over both
// holds); every full run re-checks the choice in its sweep section (see sweepConfigs).
func redislockTuned() config {
	return redislockConfig("redislock (tuned)",
		"Options{RetryStrategy: LinearBackoff(100µs)}; retry deadline = TTL (its default), then Obtain again",
		func() redislock.RetryStrategy { return redislock.LinearBackoff(100 * time.Microsecond) })
}

func (r *redislockImpl) critical(ctx context.Context, key string, body func()) (int, error) {
	gave := 0
	var l *redislock.Lock
	for {
		var opt *redislock.Options
		if r.strategy != nil {
			opt = &redislock.Options{RetryStrategy: r.strategy()}
		}
		var err error
		l, err = r.c.Obtain(ctx, key, r.ttl, opt)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return gave, ctx.Err()
		}
		if !errors.Is(err, redislock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded) {
			return gave, err
		}
		gave++
	}
	if body != nil {
		body()
	}
	return gave, l.Release(r.bg)
}

func (r *redislockImpl) close() error { return nil }
