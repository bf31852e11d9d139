package core_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// namesOnEveryMaster returns one lock name per master of cl.
func namesOnEveryMaster(t *testing.T, cl *redistest.Cluster) map[string]*redistest.Server {
	t.Helper()
	out := map[string]*redistest.Server{}
	seen := map[*redistest.Server]bool{}
	for i := 0; len(seen) < 3 && i < 1000; i++ {
		name := "acct-" + strconv.Itoa(i)
		m := cl.MasterOf(t, locktest.Key(name))
		if !seen[m] {
			seen[m] = true
			out[name] = m
		}
	}
	if len(seen) != 3 {
		t.Fatalf("found names on %d masters", len(seen))
	}
	return out
}

func TestCluster_locksOnEveryMaster_wokenBySPUBLISH(t *testing.T) {
	cl := redistest.StartCluster(t)
	holder := locktest.NewClient(t, cl.Client(t))
	waiter := locktest.NewClient(t, cl.Client(t), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx := context.Background()
	for name, master := range namesOnEveryMaster(t, cl) {
		t.Logf("%s on %s", name, master.Addr())
		l, err := holder.Acquire(ctx, name, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if st := stateOn(t, master, l.Key()); !st.Held() || st.Fence != l.Fence() {
			t.Fatalf("lock %s or its fence not on its master %s", name, master.Addr())
		}
		got := make(chan error, 1)
		go func() {
			w, err := waiter.Acquire(ctx, name, time.Second)
			if err == nil {
				err = w.Release(ctx)
			}
			got <- err
		}()
		awaitShardSubscriber(t, cl, master, name, got)
		released := time.Now()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(released); took > time.Second {
				t.Fatalf("waiter woken after %v; the fallback is 5s", took)
			}
		case <-time.After(4 * time.Second):
			t.Fatalf("waiter on %s not woken", master.Addr())
		}
		if st := master.CommandStats(t); st["spublish"] == 0 {
			t.Fatalf("no SPUBLISH on %s: %v", master.Addr(), st)
		}
	}
}

// Fair mode's direct handoff on a cluster: the release's grant (SPUBLISH) reaches the waiter,
// which holds without another attempt, on every master.
func TestCluster_fairHandoff_grantBySPUBLISH(t *testing.T) {
	cl := redistest.StartCluster(t)
	holder := locktest.NewClient(t, cl.Client(t))
	var n counting
	// No poll within the test's windows: the fallback delay and a third of the queue timeout are
	// 20 s. Only a message through the shard's channel can hand the waiter the lock in time.
	waiter := locktest.NewClient(t, cl.Client(t), core.WithRetryBackoff(20*time.Second, 40*time.Second),
		core.WithFairWaiterTimeout(60*time.Second), n.hook())
	ctx := context.Background()
	for name, master := range namesOnEveryMaster(t, cl) {
		l, err := holder.Acquire(ctx, name, 30*time.Second, core.Fair())
		if err != nil {
			t.Fatal(err)
		}
		start := n.attempts.Load()
		got := make(chan error, 1)
		go func() {
			w, err := waiter.Acquire(ctx, name, 5*time.Second, core.Fair())
			if err == nil {
				err = w.Release(ctx)
			}
			got <- err
		}()
		awaitShardSubscriber(t, cl, master, name, got)
		// Its first attempt queued it; once subscribed it tried again (a grant may have come in
		// between) and parked. (A cluster that is still settling may move the waiter's shard
		// subscription, which wakes it for one more attempt: a waiter re-checks after a feed
		// broke, as it may have missed a message.)
		locktest.Eventually(t, 5*time.Second, "waiter queued and parked", func() bool { return n.attempts.Load() >= start+2 })
		before := n.attempts.Load()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(4 * time.Second):
			t.Fatalf("waiter on %s not handed the lock", master.Addr())
		}
		if a := n.attempts.Load() - before; a > 1 {
			t.Fatalf("%d attempts after the release on %s: the grant did not reach the waiter", a, master.Addr())
		}
	}
}

// awaitShardSubscriber waits until the waiter has subscribed to name's release channel in master's
// shard: on master, or on a replica of it, which SPUBLISH reaches through replication (a waiter
// whose client has not yet seen a failover the load caused subscribes on the old master, now a
// replica). A waiter that returned meanwhile (got) fails the test with its error; a subscription
// that never shows up fails it with every node's role and count.
func awaitShardSubscriber(t *testing.T, cl *redistest.Cluster, master *redistest.Server, name string, got chan error) {
	t.Helper()
	ch := locktest.Key(name, "released")
	count := func(s *redistest.Server) any { return s.Do(t, "PUBSUB", "SHARDNUMSUB", ch).([]any)[1] }
	inShard := func(s *redistest.Server) bool {
		if s == master {
			return true
		}
		role := s.Do(t, "ROLE").([]any)
		return role[0] == "slave" && fmt.Sprintf("%v:%v", role[1], role[2]) == master.Addr()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		for _, n := range cl.Nodes() {
			if count(n) == int64(1) && inShard(n) {
				if n != master {
					t.Logf("the waiter subscribed on %s, a replica of %s", n.Addr(), master.Addr())
				}
				return
			}
		}
		select {
		case err := <-got:
			t.Fatalf("the waiter on %s returned before the release: %v", name, err)
		default:
		}
		if time.Now().After(deadline) {
			var counts []string
			for _, n := range cl.Nodes() {
				role := n.Do(t, "ROLE").([]any)
				counts = append(counts, fmt.Sprintf("%s(%v %v)=%v", n.Addr(), role[0], role[1:2], count(n)))
			}
			t.Fatalf("waiter not subscribed in the shard of %s after 10s; SHARDNUMSUB per node: %v", master.Addr(), counts)
		}
	}
}

func TestCluster_mutualExclusion(t *testing.T) {
	cl := redistest.StartCluster(t)
	plain := redistest.Start(t).Client(t)
	a := locktest.NewClient(t, cl.Client(t))
	b := locktest.NewClient(t, cl.Client(t))
	ctx := context.Background()
	var (
		mu     sync.Mutex
		fences []int64
		wg     sync.WaitGroup
		errs   = make(chan error, 32)
	)
	for _, c := range []*core.Client{a, b} {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					err := c.Do(ctx, "counter", 2*time.Second, func(ctx context.Context) error {
						v, _ := plain.Get(ctx, "counter").Int64()
						l, _ := core.FromContext(ctx)
						mu.Lock()
						fences = append(fences, l.Fence())
						mu.Unlock()
						return plain.Set(ctx, "counter", v+1, 0).Err()
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, _ := plain.Get(ctx, "counter").Int64(); got != 160 {
		t.Fatalf("counter %d, want 160", got)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d after %d", fences[i], fences[i-1])
		}
	}
}

// A master fails over while a lock is held and a waiter waits: the lock survives (it was
// replicated), the holder keeps renewing it on the new master, and the waiter is still woken by
// the release, now published by the new master.
func TestCluster_failover_waitersStillWoken(t *testing.T) {
	cl := redistest.StartCluster(t)
	holder := locktest.NewClient(t, cl.Client(t))
	waiter := locktest.NewClient(t, cl.Client(t), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx := context.Background()
	const name = "doc-1"
	old := cl.MasterOf(t, locktest.Key(name))
	l, err := holder.Acquire(ctx, name, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Acquire(ctx, name, time.Second)
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	locktest.Eventually(t, 5*time.Second, "waiter parked", func() bool { return core.WaitersParked(waiter) == 1 })
	cl.Failover(t, old)
	now := cl.MasterOf(t, locktest.Key(name))
	if now == old {
		t.Fatal("slot did not move")
	}
	// Two renewal intervals later the lock is still ours, renewed on the new master.
	time.Sleep(700 * time.Millisecond) // let renewals run against the new master: the behaviour under test
	if l.Context().Err() != nil {
		t.Fatalf("lock lost across a clean failover: %v", context.Cause(l.Context()))
	}
	if d, err := l.TTL(ctx); err != nil || d < 300*time.Millisecond {
		t.Fatalf("TTL after failover = %v, %v", d, err)
	}
	// The waiter's subscription is in the shard: on the new master, or still on the old one, now
	// its replica (a shard's replicas receive its SPUBLISH messages too).
	locktest.Eventually(t, 5*time.Second, "waiter subscribed in the shard", func() bool {
		n := int64(0)
		for _, s := range []*redistest.Server{old, now} {
			m := s.Do(t, "PUBSUB", "SHARDNUMSUB", locktest.Key(name, "released")).([]any)
			n += m[1].(int64)
		}
		return n == 1
	})
	released := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(released); took > 2*time.Second {
			t.Fatalf("woken %v after the release; the fallback is 5s", took)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("waiter not woken after failover")
	}
}

// The replica promoted by a failover had not received the lock (the asynchronous replication
// window: the replication link is cut while the lock is taken, then the master dies): the holder learns
// it from its renewals and its context is cancelled with ErrLost. Nothing keeps a lost lock
// silently.
func TestCluster_failover_unreplicatedLockReportedLost(t *testing.T) {
	cl := redistest.StartCluster(t)
	holder := locktest.NewClient(t, cl.Client(t))
	ctx := context.Background()
	const name = "doc-2"
	master := cl.MasterOf(t, locktest.Key(name))
	replica := cl.ReplicaOf(t, master)
	// A fresh cluster client's first command loads the topology from the nodes, the paused replica
	// too (5 s): that would spend the lock's validity before Acquire returns.
	warm, err := holder.TryAcquire(ctx, name, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Release(ctx)
	replica.Pause(t)
	master.Do(t, "CLIENT", "KILL", "TYPE", "replica") // the paused replica cannot reconnect
	l, err := holder.Acquire(ctx, name, 900*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	master.Kill(t)
	replica.Resume(t)
	cl.Failover(t, master)
	select {
	case <-l.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lost lock not reported")
	}
	var le *core.LostError
	if !errors.As(context.Cause(l.Context()), &le) {
		t.Fatalf("cause %v", context.Cause(l.Context()))
	}
	t.Logf("lost: %v", le)
	other := locktest.NewClient(t, cl.Client(t)) // a fresh client sees the new topology at once
	o, err := other.TryAcquire(ctx, name, time.Second)
	if err != nil {
		t.Fatalf("the new master should grant the lock: %v", err)
	}
	// The fence counter was not replicated either, but fences never fall below the server clock:
	// the new holder's fence is still above the lost holder's.
	if o.Fence() <= l.Fence() {
		t.Fatalf("fence %d after failover, not above the lost holder's %d", o.Fence(), l.Fence())
	}
	_ = o.Release(ctx)
}

// WithReplicaAck: an acquisition succeeds only once a replica has it; with the replica paused it
// fails (and leaves nothing behind) instead of handing out a lock a failover could lose.
func TestCluster_replicaAck(t *testing.T) {
	cl := redistest.StartCluster(t)
	// (A generous wait and a TTL beyond it: on a loaded host a healthy replica acknowledged later
	// than 200ms, and a wait past the lock's validity would fail as a late reply, not for the ack.)
	c := locktest.NewClient(t, cl.Client(t), core.WithReplicaAck(1, 2*time.Second))
	ctx := context.Background()
	const name = "acked"
	l, err := c.Acquire(ctx, name, 10*time.Second)
	if err != nil {
		t.Fatalf("healthy replica: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	master := cl.MasterOf(t, locktest.Key(name))
	replica := cl.ReplicaOf(t, master)
	replica.Pause(t)
	defer replica.Resume(t)
	_, err = c.TryAcquire(ctx, name, 10*time.Second)
	if !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "replicas acknowledged") {
		t.Fatalf("paused replica: %v, want ErrUnavailable: no replica acknowledged", err)
	}
	t.Logf("paused replica: %v", err)
	if heldOn(t, master, locktest.Key(name)) {
		t.Fatal("an unacknowledged lock was left behind")
	}
}
