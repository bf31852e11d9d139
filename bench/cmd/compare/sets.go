package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// Sets of locks (issue #30): n names taken for one owner, all or nothing, with core.AcquireAll,
// against taking them one by one (sorted, so that two callers cannot deadlock), with lockkit and
// with the raw floor. Uncontended: each goroutine takes its own n names in a loop, so the rows show
// what a set costs in round trips, commands, server CPU and client CPU.

// setSizes are the sizes of the sets measured.
var setSizes = []int{2, 10}

// setGoroutines is how many goroutines take their sets at once.
const setGoroutines = 16

func setConfigs(n int) []config {
	return []config{
		{name: "lockkit AcquireAll", family: "lockkit", nodes: 1,
			settings: "core.New(rdb); AcquireAll(ctx, names, ttl) (one script for the set), LockSet.Release (one script)",
			make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
				c, err := core.New(rdbs[0])
				return &lockkitSet{lockkitImpl: lockkitImpl{c: c, ttl: ttl, bg: context.Background()}, n: n}, err
			}},
		{name: "lockkit one by one", family: "lockkit", nodes: 1,
			settings: "core.New(rdb); Acquire each name in sorted order, Release each",
			make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
				c, err := core.New(rdbs[0])
				return &lockkitSet{lockkitImpl: lockkitImpl{c: c, ttl: ttl, bg: context.Background()}, n: n, each: true}, err
			}},
		{name: "raw floor one by one", family: "raw", nodes: 1,
			settings: "SET NX PX each name in sorted order, then the Lua compare-and-delete each (no all or nothing)",
			make: func(rdbs []*redis.Client, ttl time.Duration) (impl, error) {
				return &rawSet{rawImpl: newRaw(typedOps{c: rdbs[0], del: redis.NewScript(rawRelease)}, ttl), n: n}, nil
			}},
	}
}

// setNames are the n names of key's set, in sorted order.
func setNames(key string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s:%02d", key, i)
	}
	return names
}

type lockkitSet struct {
	lockkitImpl
	n    int
	each bool
}

func (l *lockkitSet) critical(ctx context.Context, key string, body func()) (int, error) {
	names := setNames(key, l.n)
	if !l.each {
		s, err := l.c.AcquireAll(ctx, names, l.ttl)
		if err != nil {
			return 0, err
		}
		if body != nil {
			body()
		}
		return 0, s.Release(l.bg)
	}
	held := make([]*core.Lock, 0, l.n)
	defer func() {
		for _, lk := range held {
			_ = lk.Release(l.bg)
		}
	}()
	for _, name := range names {
		lk, err := l.c.Acquire(ctx, name, l.ttl)
		if err != nil {
			return 0, err
		}
		held = append(held, lk)
	}
	if body != nil {
		body()
	}
	return 0, nil
}

type rawSet struct {
	*rawImpl
	n int
}

func (r *rawSet) critical(ctx context.Context, key string, body func()) (int, error) {
	names := setNames(key, r.n)
	for i, name := range names {
		if _, err := r.rawImpl.critical(ctx, name, nil); err != nil {
			return i, err
		}
	}
	if body != nil {
		body()
	}
	return 0, nil
}

func setParam(n int) string { return fmt.Sprintf("%d names", n) }

// measureSets runs the sets scenario of one round.
func (h *harness) measureSets(ctx context.Context, r int, step func(scn, param, row string, m metrics, err error) error) error {
	for _, n := range setSizes {
		for _, cfg := range rotate(setConfigs(n), r) {
			m, err := h.measureUncontended(ctx, fmt.Sprintf("set%d", n), cfg, setGoroutines, r)
			if err := step("sets", setParam(n), cfg.name, m, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeSets writes the sets scenario's section.
func writeSets(w io.Writer, s *store, p params) {
	fmt.Fprintf(w, "## Sets of locks (AcquireAll)\n\n%d goroutines each take their own set of n names for one owner and release it, in a loop for %s: `AcquireAll` (all or nothing, one script for the set on one server), against taking the names one by one in sorted order with `Acquire` and with the raw floor (neither is all or nothing). *round trips/op* and *all cmds/op* are per set.\n\n",
		setGoroutines, p.window)
	s.table(w, "sets", "set", setCols())
}

func setCols() []column {
	return []column{
		{key: "ops_s", head: "sets/s"}, {key: "p50_us", head: "p50 µs"}, {key: "p99_us", head: "p99 µs"},
		{key: "allocs_op", head: "allocs/set"}, {key: "trips_op", head: "round trips/set"},
		{key: "total_op", head: "all cmds/set"}, {key: "cpu_op_us", head: "server CPU µs/set"},
	}
}
