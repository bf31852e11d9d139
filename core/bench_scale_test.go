package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
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
	run := func(b *testing.B, c *core.Client, name string) {
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			l, err := c.Acquire(ctx, name, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		b.ReportMetric(float64(pct(lat, 50).Microseconds()), "p50-µs")
		b.ReportMetric(float64(pct(lat, 99).Microseconds()), "p99-µs")
	}
	b.Run("topology=single", func(b *testing.B) {
		run(b, newClient(b, single.Client(b)), "t")
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
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if ok, err := rdb.SetNX(ctx, "raw:{t}", "tok", time.Second).Result(); err != nil || !ok {
				b.Fatal(ok, err)
			}
			if err := rawRelease.Run(ctx, rdb, []string{"raw:{t}"}, "tok").Err(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		b.ReportMetric(float64(pct(lat, 50).Microseconds()), "p50-µs")
		b.ReportMetric(float64(pct(lat, 99).Microseconds()), "p99-µs")
	}
	b.Run("topology=single/raw-floor", func(b *testing.B) { raw(b, single.Client(b)) })
	b.Run("topology=cluster/raw-floor", func(b *testing.B) { raw(b, cl.Client(b)) })
	b.Run("topology=cluster", func(b *testing.B) {
		run(b, newClient(b, cl.Client(b)), "t")
	})
	b.Run("topology=cluster/replica-ack", func(b *testing.B) {
		run(b, newClient(b, cl.Client(b), core.WithReplicaAck(1, time.Second)), "t")
	})
}
