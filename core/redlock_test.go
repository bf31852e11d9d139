package core_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// redlockClient returns a Redlock client over srvs, with one go-redis client per node.
func redlockClient(t testing.TB, srvs []*redistest.Server, opts ...core.Option) *core.Client {
	t.Helper()
	var nodes []*redis.Options
	for _, s := range srvs {
		nodes = append(nodes, s.Options())
	}
	return redlockOver(t, nodes, opts...)
}

// redlockOver returns a Redlock client with one go-redis client per node, from the nodes' options
// with the settings topologies.md recommends.
func redlockOver(t testing.TB, opts []*redis.Options, copts ...core.Option) *core.Client {
	t.Helper()
	var nodes []redis.UniversalClient
	for _, o := range opts {
		o.MaxRetries = -1 // a dead node must cost one timeout, not several
		o.ContextTimeoutEnabled = true
		o.DialerRetries = 1 // report "connection refused", not a deadline after 5 dial retries
		rdb := redis.NewClient(o)
		t.Cleanup(func() { rdb.Close() })
		nodes = append(nodes, rdb)
	}
	c, err := core.NewRedlock(nodes, copts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func TestRedlock_acquireReleaseOnEveryNode(t *testing.T) {
	srvs := redistest.StartN(t, 5)
	// A node whose grant takes longer than the node timeout is abandoned, and holds nothing (the
	// default, TTL/20, is 50 ms here: a fresh connection on CI's loaded host took longer). This
	// test is about the grants that land after the quorum, so every node gets time to answer.
	const nodeTimeout = 2 * time.Second
	c := redlockClient(t, srvs, core.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= 0 {
		t.Fatalf("fence %d", l.Fence())
	}
	// Acquire returns once a quorum granted; the other nodes' grants land just after and are kept.
	for _, s := range srvs {
		locktest.Eventually(t, 2*nodeTimeout, "lock on "+s.Addr(), func() bool { return heldOn(t, s, locktest.Key("k")) })
	}
	if _, err := c.TryAcquire(ctx, "k", time.Second); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("second holder: %v", err)
	}
	in, err := c.TryAcquire(l.Context(), "k", time.Second)
	if err != nil || in.Holds() != 2 {
		t.Fatalf("reentry over redlock: %v", err)
	}
	_ = in.Release(ctx)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release returns once a quorum released; the other nodes follow at once.
	for _, s := range srvs {
		locktest.Eventually(t, 2*nodeTimeout, "lock freed on "+s.Addr(), func() bool { return !heldOn(t, s, locktest.Key("k")) })
	}
	if _, err := c.Acquire(ctx, "k", time.Second, core.Fair()); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("fair over redlock: %v", err)
	}
}

// timeoutSlack is what a call bounded by the node timeout may take beyond it on a loaded CI host
// (two test binaries and a race build beside it took more than 200 ms). Well under the 3 s read
// timeout a call without the node timeout would wait for a paused node.
const timeoutSlack = time.Second

func TestRedlock_quorum_twoDownWorks_threeDownFailsClearly(t *testing.T) {
	srvs := redistest.StartN(t, 5)
	// Stopped nodes refuse at once; the three up must all answer within it on a loaded CI host.
	const nodeTimeout = 500 * time.Millisecond
	c := redlockClient(t, srvs, core.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	srvs[0].Stop(t)
	srvs[1].Stop(t)
	l, err := c.Acquire(ctx, "k", time.Second)
	if err != nil {
		t.Fatalf("with 2 of 5 down: %v", err)
	}
	_ = l.Release(ctx)
	srvs[2].Stop(t)
	start := time.Now()
	_, err = c.TryAcquire(ctx, "k", time.Second)
	took := time.Since(start)
	var qe *core.QuorumError
	if !errors.Is(err, core.ErrUnavailable) || !errors.As(err, &qe) {
		t.Fatalf("with 3 of 5 down: %v, want a QuorumError", err)
	}
	if qe.OK != 2 || qe.Nodes != 5 || qe.Quorum != 3 || len(qe.Errs) != 3 {
		t.Fatalf("quorum error %+v", qe)
	}
	if took > nodeTimeout+timeoutSlack {
		t.Fatalf("failing took %v, more than the per-node timeout", took)
	}
	t.Logf("3 of 5 down: %v after %v", err, took)
}

func TestRedlock_pausedNode_costsAtMostNodeTimeout(t *testing.T) {
	srvs := redistest.StartN(t, 5)
	// Long enough that the healthy nodes answer within it on a starved CI host (150 ms once did
	// not: a fence write-back timed out), far below the 3 s read timeout a paused node would cost
	// without it.
	const nodeTimeout = 500 * time.Millisecond
	c := redlockClient(t, srvs, core.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	srvs[4].Pause(t)
	defer srvs[4].Resume(t)
	for i := range 3 {
		start := time.Now()
		l, err := c.Acquire(ctx, "k"+strconv.Itoa(i), 5*time.Second)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if took > nodeTimeout+timeoutSlack {
			t.Fatalf("acquire with a paused node took %v, per-node timeout %v", took, nodeTimeout)
		}
		_ = l.Release(ctx)
	}
	srvs[1].Pause(t)
	srvs[2].Pause(t)
	defer srvs[1].Resume(t)
	defer srvs[2].Resume(t)
	start := time.Now()
	if _, err := c.TryAcquire(ctx, "x", 5*time.Second); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("3 paused: %v", err)
	}
	if took := time.Since(start); took > nodeTimeout+timeoutSlack {
		t.Fatalf("failing with 3 paused nodes took %v", took)
	}
}

// Acquire and Release return once a quorum answered: a paused node does not set their latency, even
// with a long node timeout. The paused node's grant, landing after Acquire returned, is kept (the
// lock lives on every node again once it resumes) and released with the rest.
func TestRedlock_returnsAtQuorum_lateGrantKept(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	const nodeTimeout = 3 * time.Second
	c := redlockClient(t, srvs, core.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	if l, err := c.Acquire(ctx, "warm", time.Minute); err != nil { // connections dialled before the pause
		t.Fatal(err)
	} else if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	srvs[2].Pause(t)
	start := time.Now()
	l, err := c.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > nodeTimeout/3 {
		t.Fatalf("acquire waited %v for the paused node (node timeout %v)", took, nodeTimeout)
	}
	srvs[2].Resume(t)
	locktest.Eventually(t, 2*time.Second, "late grant kept on the resumed node", func() bool {
		return stateOn(t, srvs[2], locktest.Key("k")).Token == l.Token()
	})
	if l.Context().Err() != nil {
		t.Fatalf("lock context ended: %v", context.Cause(l.Context()))
	}
	srvs[2].Pause(t)
	start = time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > nodeTimeout/3 {
		t.Fatalf("release waited %v for the paused node", took)
	}
	srvs[2].Resume(t)
	for _, s := range srvs {
		locktest.Eventually(t, 2*time.Second, "lock freed on "+s.Addr(), func() bool { return !heldOn(t, s, locktest.Key("k")) })
	}
}

// Node counters diverge (here one node's counter ran far ahead, as after a clock set forward); the
// write-back brings a quorum up to each fence before it is handed out, so later quorums that do not
// include that node still see it.
func TestRedlock_fenceMonotonic_divergentCounters(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	c := redlockClient(t, srvs, core.WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	a, b, cn := srvs[0], srvs[1], srvs[2]
	const ahead = 5_000_000_000_000_000 // far above any clock-based fence, below 2^53
	// A free lock on b whose fence ran ahead (the lock's value, see internal/script/lua/lock.lua).
	b.Do(t, "SET", locktest.Key("f"), "\x00"+strconv.Itoa(ahead)+"\x00", "PX", 60000)
	take := func(what string) int64 {
		t.Helper()
		l, err := c.Acquire(ctx, "f", time.Second)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s: release: %v", what, err)
		}
		return l.Fence()
	}
	cn.Stop(t)
	f1 := take("quorum A+B") // B says ahead+1: the fence, written back to A
	if f1 != ahead+1 {
		t.Fatalf("fence %d, want %d (the quorum's maximum)", f1, int64(ahead+1))
	}
	if got := stateOn(t, a, locktest.Key("f")).Fence; got != ahead+1 {
		t.Fatalf("fence on the lagging node = %v, want it written back", got)
	}
	cn.Restart(t)
	b.Stop(t)
	f2 := take("quorum A+C") // without the write-back both would answer about the clock: far below f1
	if f2 <= f1 {
		t.Fatalf("fence %d after %d: not monotonic across quorums", f2, f1)
	}
}

// Mutual exclusion over 5 persistent nodes while nodes crash and restart one at a time.
func TestRedlock_mutualExclusion_nodesKilledAndRestarted(t *testing.T) {
	srvs := redistest.StartN(t, 5, redistest.WithPersistence())
	plain := redistest.Start(t).Client(t)
	a := redlockClient(t, srvs, core.WithNodeTimeout(300*time.Millisecond))
	b := redlockClient(t, srvs, core.WithNodeTimeout(300*time.Millisecond))
	ctx := context.Background()
	stop := make(chan struct{})
	chaosDone := make(chan int)
	var crashed atomic.Int64
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				chaosDone <- n
				return
			default:
			}
			s := srvs[n%5]
			s.Kill(t)
			time.Sleep(50 * time.Millisecond) // the node stays down a while: the fault under test
			s.Restart(t)
			n++
			crashed.Store(int64(n))
			// One node impaired at a time: go-redis keeps answering a dial error for up to a
			// second after a node is back, so the next crash waits for the pools to recover.
			select {
			case <-stop:
			case <-time.After(1200 * time.Millisecond):
			}
		}
	}()
	var (
		mu          sync.Mutex
		fences      []int64
		wg          sync.WaitGroup
		errs        = make(chan error, 16)
		unavailable atomic.Int64
	)
	const perClient, rounds = 8, 10
	var incs atomic.Int64 // increments fn saw succeed
	for _, c := range []*core.Client{a, b} {
		for range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done := 0; done < rounds || crashed.Load() < 3; {
					ran := false
					err := c.Do(ctx, "counter", 3*time.Second, func(ctx context.Context) error {
						v, _ := plain.Get(ctx, "counter").Int64()
						l, _ := core.FromContext(ctx)
						mu.Lock()
						fences = append(fences, l.Fence())
						mu.Unlock()
						if err := plain.Set(ctx, "counter", v+1, 0).Err(); err != nil {
							return err
						}
						incs.Add(1)
						ran = true
						return nil
					})
					if ran {
						done++
					}
					switch {
					case err == nil:
					case errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrLost):
						// No quorum reachable at this moment, or the lock could not be kept: expected
						// outcomes under faults. Exclusion and fences are what must hold.
						unavailable.Add(1)
						time.Sleep(20 * time.Millisecond)
					default:
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	crashes := <-chaosDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, _ := plain.Get(ctx, "counter").Int64()
	if want := incs.Load(); got != want || want < 2*perClient*rounds || crashes < 3 {
		t.Fatalf("counter %d after %d increments (%d crashes): two holders overlapped", got, want, crashes)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d after %d", fences[i], fences[i-1])
		}
	}
	t.Logf("%d critical sections, %d node crashes, %d acquisitions refused for want of a quorum", len(fences), crashes, unavailable.Load())
}

func TestRedlock_waiterWokenByRelease(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	// Node timeouts well above a loaded CI machine's hiccups: this test is about the wake-up.
	holder := redlockClient(t, srvs, core.WithNodeTimeout(time.Second))
	waiter := redlockClient(t, srvs, core.WithNodeTimeout(time.Second), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Acquire(ctx, "k", time.Second)
		if err == nil {
			_ = w.Release(ctx)
		}
		got <- err
	}()
	locktest.Eventually(t, 5*time.Second, "waiter parked", func() bool { return core.WaitersParked(waiter) == 1 })
	// Subscribed on every node before the release.
	locktest.Eventually(t, 5*time.Second, "subscribed on all nodes", func() bool {
		for _, s := range srvs {
			m := s.Do(t, "PUBSUB", "NUMSUB", locktest.Key("k", "released")).([]any)
			if m[1] != int64(1) {
				return false
			}
		}
		return true
	})
	released := time.Now()
	_ = l.Release(ctx)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(released); took > time.Second {
			t.Fatalf("woken after %v (fallback is 5s)", took)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("waiter not woken")
	}
}
