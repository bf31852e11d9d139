package core_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkTopology compares lock+unlock latency (one goroutine) on a single node, a 3-node Redlock
// and a 6-node cluster (with and without WithReplicaAck), in one run. Reports p50/p99 and, for
// Redlock, round trips per node per lock+unlock.
func BenchmarkTopology(b *testing.B) {
	single := redistest.Start(b)
	nodes := redistest.StartN(b, 3)
	cl := redistest.StartCluster(b)
	ctx := context.Background()
	// latency runs op b.N times and reports its p50 and p99.
	latency := func(b *testing.B, op func() error) {
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if err := op(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		b.ReportMetric(float64(pct(lat, 50).Microseconds()), "p50-µs")
		b.ReportMetric(float64(pct(lat, 99).Microseconds()), "p99-µs")
	}
	run := func(b *testing.B, c *core.Client, name string) {
		latency(b, func() error {
			l, err := c.Acquire(ctx, name, time.Second)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		})
	}
	b.Run("topology=single", func(b *testing.B) {
		run(b, locktest.NewClient(b, single.Client(b)), "t")
	})
	b.Run("topology=redlock3", func(b *testing.B) {
		var rdbs []redis.UniversalClient
		for _, n := range nodes {
			o := n.Options()
			o.ContextTimeoutEnabled = true
			rdb := redis.NewClient(o)
			b.Cleanup(func() { rdb.Close() })
			rdbs = append(rdbs, rdb)
		}
		c, err := core.NewRedlock(rdbs)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(ctx) })
		for _, n := range nodes {
			n.ResetStats(b)
		}
		run(b, c, "t")
		var calls int64
		for _, n := range nodes {
			st := n.CommandStats(b)
			calls += st["evalsha"] + st["eval"]
		}
		b.ReportMetric(float64(calls)/float64(len(nodes))/float64(b.N), "rtt/node")
	})
	raw := func(b *testing.B, rdb redis.UniversalClient) {
		latency(b, func() error {
			if ok, err := rdb.SetNX(ctx, "raw:{t}", "tok", time.Second).Result(); err != nil || !ok {
				return fmt.Errorf("raw lock: %v %v", ok, err)
			}
			return rawRelease().Run(ctx, rdb, []string{"raw:{t}"}, "tok").Err()
		})
	}
	b.Run("topology=single/raw-floor", func(b *testing.B) { raw(b, single.Client(b)) })
	b.Run("topology=redlock3/raw-floor", func(b *testing.B) {
		// The hardware's floor for a 3-node quorum: SET NX PX on every node in parallel, then the
		// compare-and-delete on every node in parallel, as redsync does (no fence, no watchdog).
		var rdbs []*redis.Client
		for _, n := range nodes {
			rdbs = append(rdbs, n.Client(b))
		}
		par := func(fn func(rdb *redis.Client) error) {
			var wg sync.WaitGroup
			errs := make([]error, len(rdbs))
			for i, rdb := range rdbs {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = fn(rdb) }()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		latency(b, func() error {
			par(func(rdb *redis.Client) error { return rdb.SetNX(ctx, "raw:{t}", "tok", time.Second).Err() })
			par(func(rdb *redis.Client) error { return rawRelease().Run(ctx, rdb, []string{"raw:{t}"}, "tok").Err() })
			return nil
		})
	})
	b.Run("topology=cluster/raw-floor", func(b *testing.B) { raw(b, cl.Client(b)) })
	b.Run("topology=cluster", func(b *testing.B) {
		run(b, locktest.NewClient(b, cl.Client(b)), "t")
	})
	b.Run("topology=cluster/replica-ack", func(b *testing.B) {
		run(b, locktest.NewClient(b, cl.Client(b), core.WithReplicaAck(1, time.Second)), "t")
	})
}

// BenchmarkRedlockLockUnlock measures uncontended lock+unlock over a 3-node Redlock (a distinct key
// per goroutine) for lockkit and the 3-node floor, side by side in one run, at 1, 16 and 64
// goroutines. The floor is what redsync does: SET NX PX on every node in parallel (a goroutine per
// node), then the compare-and-delete on every node in parallel. The TTL is 8s (as in make
// bench-compare), so the node timeout is 400ms: with 1s (50ms) a loaded 2-core machine at 64
// goroutines sometimes misses a quorum, and the run fails.
func BenchmarkRedlockLockUnlock(b *testing.B) {
	const rlTTL = 8 * time.Second
	nodes := redistest.StartN(b, 3)
	ctx := context.Background()
	for _, g := range []int{1, 16, 64} {
		var rdbs []*redis.Client
		var unis []redis.UniversalClient
		for _, n := range nodes {
			rdb := redis.NewClient(poolOpts(n, g))
			b.Cleanup(func() { rdb.Close() })
			rdbs = append(rdbs, rdb)
			unis = append(unis, rdb)
		}
		c, err := core.NewRedlock(unis)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(ctx) })
		b.Run(fmt.Sprintf("impl=raw3/g=%d", g), func(b *testing.B) {
			runParallel(b, g, func(i int) func() error {
				key, token := "raw3:"+strconv.Itoa(i), tokenFor(i)
				return func() error { return rawQuorum(ctx, rdbs, key, token) }
			})
		})
		b.Run(fmt.Sprintf("impl=lockkit/g=%d", g), func(b *testing.B) {
			runParallel(b, g, func(i int) func() error {
				name := "rl:" + strconv.Itoa(i)
				return func() error {
					l, err := c.Acquire(ctx, name, rlTTL)
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}
			})
		})
	}
}

// rawQuorum is the 3-node floor's lock+unlock (see BenchmarkRedlockLockUnlock).
func rawQuorum(ctx context.Context, rdbs []*redis.Client, key, token string) error {
	par := func(fn func(rdb *redis.Client) error) error {
		errs := make(chan error, len(rdbs))
		for _, rdb := range rdbs {
			go func() { errs <- fn(rdb) }()
		}
		var first error
		for range rdbs {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	if err := par(func(rdb *redis.Client) error { return rdb.SetNX(ctx, key, token, 8*time.Second).Err() }); err != nil {
		return err
	}
	return par(func(rdb *redis.Client) error { return rawRelease().Run(ctx, rdb, []string{key}, token).Err() })
}
