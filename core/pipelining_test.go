package core_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// batchSizes is a go-redis hook recording the largest pipeline a client sent.
type batchSizes struct{ largest atomic.Int64 }

func (b *batchSizes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (b *batchSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (b *batchSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for n := int64(len(cmds)); ; {
			m := b.largest.Load()
			if n <= m || b.largest.CompareAndSwap(m, n) {
				break
			}
		}
		return next(ctx, cmds)
	}
}

// pipelinedWorkload runs, on c, many goroutines that lock names of their own, contend for a hot
// name (checking mutual exclusion), and (where the store has them: not over Redlock) take
// permits, fair locks and sets, while a lock held past its TTL is renewed and Inspect reads it.
// Every call must succeed.
func pipelinedWorkload(t *testing.T, c *core.Client, fairAndSets bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	held, err := c.Acquire(ctx, "renewed", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var inside, overlaps, failed atomic.Int64
	var first sync.Once
	fail := func(err error) {
		failed.Add(1)
		first.Do(func() { t.Errorf("pipelined call: %v", err) })
	}
	for g := range 24 {
		wg.Go(func() {
			for i := range 15 {
				var opts []core.AcquireOption
				name := fmt.Sprintf("own-%d", g)
				switch {
				case g%4 == 0:
					name = "hot"
				case g%4 == 1 && fairAndSets:
					name, opts = "sem", []core.AcquireOption{core.Permits(3)}
				case g%4 == 2 && fairAndSets && i%2 == 0:
					name, opts = "fair", []core.AcquireOption{core.Fair()}
				}
				l, err := c.Acquire(ctx, name, 5*time.Second, opts...)
				if err != nil {
					fail(err)
					return
				}
				if name == "hot" || name == "fair" {
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					inside.Add(-1)
				}
				if err := l.Release(ctx); err != nil {
					fail(err)
					return
				}
				if fairAndSets && g%4 == 3 && i%3 == 0 {
					s, err := c.AcquireAll(ctx, []string{name, fmt.Sprintf("set-%d", g)}, 5*time.Second)
					if err != nil {
						fail(err)
						return
					}
					if err := s.Release(ctx); err != nil {
						fail(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if overlaps.Load() > 0 || failed.Load() > 0 {
		t.Fatalf("%d overlapping critical sections, %d failed calls", overlaps.Load(), failed.Load())
	}
	// Hold it past its TTL whatever the workload took: only renewals keep it.
	time.Sleep(1200 * time.Millisecond)
	if err := held.Context().Err(); err != nil {
		t.Fatalf("a lock held through the workload was lost: %v", context.Cause(held.Context()))
	}
	info, err := c.Inspect(ctx, "renewed")
	if err != nil || !info.Held {
		t.Fatalf("Inspect: %+v, %v: want the renewed lock held", info, err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Over one server, concurrent callers' commands share pipelines, and every operation works
// through them (the go-redis client's own pipeliner, built on first use).
func TestPipelining_standalone_coalescesAndEverythingWorks(t *testing.T) {
	srv := redistest.Start(t)
	px := srv.StartDelayProxy(t, time.Millisecond) // a link slow enough for commands to meet
	rdb := redis.NewClient(px.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	var b batchSizes
	rdb.AddHook(&b)
	c := locktest.NewClient(t, rdb, core.WithPipelining(2))
	pipelinedWorkload(t, c, true)
	if b.largest.Load() < 2 {
		t.Fatalf("largest pipeline %d: nothing was coalesced", b.largest.Load())
	}
}

// The server lost its scripts (a restart, a promoted replica, SCRIPT FLUSH): a pipelined EVALSHA
// fails with NOSCRIPT alone and is sent again as EVAL.
func TestPipelining_noScript(t *testing.T) {
	srv, rdb, c := setup(t, core.WithPipelining(1))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	srv.Do(t, "SCRIPT", "FLUSH")
	pipelinedWorkload(t, c, true)
	_ = rdb
}

// On a cluster the pipeliner routes per slot: names on every master, sharded pub/sub, fair
// handoff and permits all work with every command pipelined.
func TestPipelining_cluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := locktest.NewClient(t, cl.Client(t), core.WithPipelining(1))
	pipelinedWorkload(t, c, true)
}

// Through Sentinel (a failover client is a *redis.Client), before and after a failover.
func TestPipelining_sentinel(t *testing.T) {
	s := redistest.StartSentinel(t)
	c := locktest.NewClient(t, s.Client(t), core.WithPipelining(1))
	pipelinedWorkload(t, c, true)
	old, _ := s.Servers()
	s.Failover(t)
	// Until the old master is a replica it takes writes that the failover then drops (with or
	// without pipelining: asynchronous replication); the test is about what comes after, so it
	// demotes the old master as the Sentinel would a little later.
	host, port, _ := strings.Cut(s.MasterAddr(t), ":")
	old.Do(t, "REPLICAOF", host, port)
	locktest.Eventually(t, 10*time.Second, "the old master demoted", func() bool {
		r, _ := old.Do(t, "ROLE").([]any)
		return len(r) > 0 && r[0] == "slave"
	})
	locktest.Eventually(t, 10*time.Second, "locks taken on the new master", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l, err := c.TryAcquire(ctx, "after", time.Second)
		return err == nil && l.Release(ctx) == nil
	})
	pipelinedWorkload(t, c, true)
}

// Over Redlock, each node's traffic goes through that node's client's pipeliner.
func TestPipelining_redlock(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	var opts []*redis.Options
	for _, s := range srvs {
		opts = append(opts, s.Options())
	}
	c := redlockOver(t, opts, core.WithPipelining(1), core.WithNodeTimeout(300*time.Millisecond))
	pipelinedWorkload(t, c, false)
}
