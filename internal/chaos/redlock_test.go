package chaos_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

const redlockTTL = time.Second

// redlockNodeTimeout is each node's answer deadline: a fifth of the TTL, far above a healthy round
// trip even with -race on a loaded 2-core host (at 50 ms, healthy nodes missed it under load and
// most attempts failed as unavailable), far below the TTL (a dead node costs one per attempt).
const redlockNodeTimeout = redlockTTL / 5

// redlockVia returns a Redlock client whose node connections go through the proxies.
func redlockVia(t *testing.T, srvs []*redistest.Server, pxs []*chaos.Proxy, hook core.Hook) *core.Client {
	var nodes []redis.UniversalClient
	for i, s := range srvs {
		o := s.Options()
		o.MaxRetries = -1 // a dead node costs one node timeout, not several
		o.ContextTimeoutEnabled = true
		o.DialerRetries = 1
		nodes = append(nodes, redisVia(t, o, pxs[i].Addr()))
	}
	c, err := core.NewRedlock(nodes, core.WithNodeTimeout(redlockNodeTimeout), core.WithHook(hook))
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
		if n == 3 {
			for _, dl := range secs.lostSince(start, time.Now()) {
				row.Detection(dl)
			}
		}
		time.Sleep(redlockTTL / 2) // let connections recover before the next fault
	}
	const want = 10 // the workload must have run
	secs.settle(want, 30*time.Second)
	close(stop)
	wg.Wait()
	n, lost := secs.check(t, row)
	t.Logf("redlock: %d sections (%d lost), %d rounds (%d with a majority down), errors %v", n, lost, rounds, majority, secs.errs)
	if n < want {
		t.Errorf("only %d critical sections, want at least %d", n, want)
	}
}
