package core_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Issue #16, defect 4: over Redlock, Release, ReleaseSet and TTL wait for each node the per-node
// timeout of the lock's TTL (TTL/20), not that of a fixed 1 s pseudo-TTL (50 ms): with 60 ms round
// trips they succeed, also on nodes that lost their scripts (NOSCRIPT, then EVAL: two round trips).
func TestRedlock_release_nodeTimeoutFollowsLockTTL(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	const rtt = 60 * time.Millisecond
	var far []*redis.Options
	for _, s := range srvs {
		far = append(far, s.StartDelayProxy(t, rtt).Options())
	}
	c := redlockOver(t, far)
	ctx := context.Background()
	gone := func(key string) {
		t.Helper()
		for _, s := range srvs {
			eventually(t, 2*time.Second, key+" freed on "+s.Addr(), func() bool { return !heldOn(t, s, key) })
		}
	}
	// Load the scripts on every node through a direct client, so that the distant client's calls
	// take one round trip each.
	warm := redlockClient(t, srvs)
	for _, set := range []bool{false, true} {
		l, err := warm.Acquire(ctx, "warm", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.TTL(ctx); err != nil {
			t.Fatal(err)
		}
		if set {
			err = l.ReleaseSet(ctx, "lockkit:done:{warm}", []byte("x"), time.Second)
		} else {
			err = l.Release(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	// Dial the distant client's connections (a new one costs a dial and a HELLO first): a few
	// concurrent acquisitions with a long TTL leave several idle connections to each node.
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if _, err := c.TryAcquire(ctx, "dial"+strconv.Itoa(i), time.Minute); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	const ttl = 3 * time.Second // 150 ms per node: 2.5 round trips
	l, err := c.Acquire(ctx, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.TTL(ctx); err != nil || d <= ttl/2 {
		t.Fatalf("TTL = %v, %v", d, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release with %v round trips: %v", rtt, err)
	}
	gone("lockkit:{a}")

	l, err = c.Acquire(ctx, "b", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ReleaseSet(ctx, "lockkit:done:{b}", []byte("v"), time.Minute); err != nil {
		t.Fatalf("ReleaseSet with %v round trips: %v", rtt, err)
	}
	gone("lockkit:{b}")

	// Fresh nodes (a restart without persistence, SCRIPT FLUSH): the release costs two round
	// trips; 5 s gives each node 250 ms. (With the 50 ms of the old pseudo-TTL the EVAL fallback
	// was cancelled and the lock stayed on every node until its TTL.)
	l, err = c.Acquire(ctx, "c", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range srvs {
		s.Do(t, "SCRIPT", "FLUSH")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release on fresh nodes: %v", err)
	}
	gone("lockkit:{c}")
}

// Issue #16, defect 11: Extend returns once a quorum renewed; a dead node costs at most the node
// timeout, not a sixth of the TTL.
func TestRedlock_extend_pausedNodeCostsAtMostNodeTimeout(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	const nodeTimeout = 100 * time.Millisecond
	c := redlockClient(t, srvs, core.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	const ttl = 8 * time.Second
	l, err := c.Acquire(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	srvs[2].Pause(t)
	defer srvs[2].Resume(t)
	for i := range 3 {
		start := time.Now()
		err := l.Extend(ctx, ttl)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("Extend %d with one node paused: %v", i, err)
		}
		if took > 500*time.Millisecond {
			t.Fatalf("Extend %d took %v with one node paused (node timeout %v, TTL/6 = %v)", i, took, nodeTimeout, ttl/6)
		}
	}
	for _, s := range srvs[:2] {
		if d := s.Do(t, "PTTL", "lockkit:{k}").(int64); d < int64((ttl - time.Second).Milliseconds()) {
			t.Fatalf("PTTL on %s = %d ms after Extend", s.Addr(), d)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
