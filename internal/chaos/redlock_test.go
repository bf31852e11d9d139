package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

const redlockTTL = time.Second

// redlockVia returns a Redlock client whose node connections go through the proxies, with the
// default node timeout, which follows the nodes' round trips. (A fixed 200 ms, a fifth of the TTL,
// was missed under CI's load by nodes that answered: each request it cut closed its connection,
// the next one paid a new dial through the proxies and was cut too, and the run made 0 critical
// sections in 41 s, every attempt failing with "i/o timeout" on every node.)
func redlockVia(t *testing.T, srvs []*redistest.Server, pxs []*chaos.Proxy, hook core.Hook) *core.Client {
	var nodes []redis.UniversalClient
	for i, s := range srvs {
		o := s.Options()
		o.MaxRetries = -1 // a dead node costs one node timeout, not several
		o.ContextTimeoutEnabled = true
		o.DialerRetries = 1
		nodes = append(nodes, redisVia(t, o, pxs[i].Addr()))
	}
	c, err := core.NewRedlock(nodes, core.WithHook(hook))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// runRedlock: two Redlock clients over five persistent nodes, eight workers taking two locks in a
// loop, while faults hit a minority of nodes (the locks must hold: no loss, no overlap) or a
// majority (the holders must be cancelled before anyone else gets the lock).
func runRedlock(t *testing.T, rep *chaos.Report) {
	row := rep.Row("redlock, 5 nodes: minority and majority faults")
	srvs := redistest.StartN(t, 5, redistest.WithPersistence())
	pxs := make([]*chaos.Proxy, len(srvs))
	for i, s := range srvs {
		pxs[i] = chaos.NewProxy(t, s.Addr())
	}
	secs := newSections()
	clients := []*core.Client{redlockVia(t, srvs, pxs, secs.hook()), redlockVia(t, srvs, pxs, secs.hook())}
	stop := make(chan struct{})
	wg := secs.workers(clients, 4, []string{"a", "b"}, redlockTTL, 2*redlockTTL, stop)
	rounds := pick(4, 30)
	majority := 0
	for r := range rounds {
		time.Sleep(between(redlockTTL/4, redlockTTL)) // quiet time between faults
		n := 1 + rand.N(2)                            // a minority
		if r%2 == 1 {
			n = 3 // a majority
			majority++
		}
		perm := rand.Perm(len(srvs))[:n]
		d := between(redlockTTL/2, 2*redlockTTL)
		kind := rand.N(4)
		start := time.Now()
		for _, i := range perm {
			var err error
			switch kind {
			case 0:
				err = pxs[i].Latency(between(redlockTTL/10, redlockTTL), 10*time.Millisecond)
			case 1:
				err = pxs[i].Blackhole(d)
			case 2:
				err = pxs[i].Reset()
			default:
				srvs[i].Kill(t)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		row.Faults(n)
		time.Sleep(d) // the fault lasts d
		for _, i := range perm {
			if kind == 3 {
				srvs[i].Restart(t) // with its data: persistence is on
			} else {
				pxs[i].Clear()
			}
		}
		healed(t, srvs, pxs, fmt.Sprintf("round %d: %s on nodes %v for %v", r, []string{"latency", "blackhole", "reset", "kill"}[kind], perm, d))
		if n == 3 {
			for _, dl := range secs.lostSince(start, time.Now()) {
				row.Detection(dl)
			}
		}
		time.Sleep(redlockTTL / 2) // let connections recover before the next fault
	}
	const want = 10 // the workload must have run
	secs.settle(want, 30*time.Second)
	slow := quorumRoundTrip(t, srvs, pxs) // (while the workers still run: the load they saw)
	close(stop)
	wg.Wait()
	n, lost := secs.check(t, row)
	t.Logf("redlock: %d sections (%d lost), %d rounds (%d with a majority down), errors %v (last: %v)", n, lost, rounds, majority, secs.errs, secs.last)
	switch {
	case n >= want:
	case slow > redlockTTL/3:
		// No lock can be granted when a quorum answers slower than TTL/3 (the longest node
		// timeout): a host too loaded for this TTL, not a fault of the lock. (Safety was checked.)
		t.Logf("inconclusive liveness: only %d critical sections; a quorum of nodes answered PING in %v, longer than TTL/3 (%v)", n, slow, redlockTTL/3)
	default:
		t.Errorf("only %d critical sections, want at least %d (a quorum of nodes answered PING in %v, TTL %v)", n, want, slow, redlockTTL)
	}
}

// healed waits, at most 10 s, until every node answers PING through its proxy again once its
// fault was cleared, clearing a proxy again while its node does not answer (under load a cleared
// reset fault once seemed to stay in place). It logs the nodes that still do not answer: at load 30
// every proxy of the run, faulted or not, once stayed silent for 10 s, so this measures the host as
// much as the fault; the liveness check at the end says which.
func healed(t *testing.T, srvs []*redistest.Server, pxs []*chaos.Proxy, round string) {
	t.Helper()
	rdbs := make([]*redis.Client, len(pxs))
	for i, px := range pxs {
		o := srvs[i].Options()
		o.MaxRetries, o.DialTimeout, o.ReadTimeout, o.WriteTimeout = -1, time.Second, time.Second, time.Second
		rdbs[i] = redisVia(t, o, px.Addr())
	}
	start := time.Now()
	down := map[int]error{}
	for i := range pxs {
		down[i] = nil
	}
	clears := 0
	for len(down) > 0 {
		for i := range down {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := rdbs[i].Ping(ctx).Err()
			cancel()
			if err == nil {
				delete(down, i)
			} else {
				down[i] = err
			}
		}
		if len(down) == 0 || time.Since(start) > 10*time.Second {
			break
		}
		for i := range down {
			pxs[i].Clear()
			clears++
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(down) > 0 || clears > 0 {
		t.Logf("%s: %d more clears; %v later, nodes not answering PING through their proxies: %v", round, clears, time.Since(start).Round(time.Millisecond), down)
	}
}

// quorumRoundTrip is how long a quorum of nodes takes to answer PING through their proxies: for
// each node the median of 3 round trips on one connection (its dial not counted; 1 s when a PING
// fails), then the quorum-th fastest node's.
func quorumRoundTrip(t *testing.T, srvs []*redistest.Server, pxs []*chaos.Proxy) time.Duration {
	var per []time.Duration
	for i, px := range pxs {
		o := srvs[i].Options()
		o.MaxRetries, o.PoolSize, o.DialTimeout, o.ReadTimeout = -1, 1, time.Second, time.Second
		rdb := redisVia(t, o, px.Addr())
		var ds []time.Duration
		_ = rdb.Ping(context.Background()).Err() // dial
		for range 3 {
			start := time.Now()
			if rdb.Ping(context.Background()).Err() != nil {
				ds = append(ds, time.Second)
				continue
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		per = append(per, ds[len(ds)/2])
	}
	slices.Sort(per)
	return per[len(per)/2]
}
