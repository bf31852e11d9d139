package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// On a cluster, for names on every master: readers share, a queued writer is granted by the last
// reader's release (SPUBLISH: its waiter polls only every 1.6 s), and every key of the name stays
// in the name's slot (a script touching two slots would fail with CROSSSLOT).
func TestRW_cluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	a := locktest.NewClient(t, cl.Client(t))
	b := locktest.NewClient(t, cl.Client(t), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name := range namesOnEveryMaster(t, cl) {
		r1, err := a.Acquire(ctx, name, 10*time.Second, core.Read())
		if err != nil {
			t.Fatal(err)
		}
		r2, err := a.Acquire(ctx, name, 10*time.Second, core.Read())
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan rwGot, 1)
		go func() {
			w, err := b.Acquire(ctx, name, time.Second, core.Write())
			got <- rwGot{w, err}
		}()
		locktest.Eventually(t, 5*time.Second, "writer queued", func() bool {
			info, err := a.Inspect(ctx, name)
			return err == nil && info.RWQueued == 1 && len(info.Readers) == 2
		})
		_ = r1.Release(ctx)
		released := time.Now()
		_ = r2.Release(ctx)
		w := waitGot(t, got, 2*time.Second, name+": writer")
		t.Logf("%s: writer granted %v after the last reader's release", name, time.Since(released).Round(time.Millisecond))
		if w.Fence() <= r2.Fence() {
			t.Fatalf("%s: writer's fence %d not above the readers' %d", name, w.Fence(), r2.Fence())
		}
		if ok, err := a.ForceRelease(ctx, name); !ok || err != nil {
			t.Fatalf("%s: force release on a cluster: %v %v", name, ok, err)
		}
		_ = w.Release(ctx)
	}
}

// Through a Sentinel failover client: a writer held across a failover keeps being renewed on the
// new master, and the readers queued behind it are granted by its release.
func TestRW_sentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	holder := locktest.NewClient(t, s.Client(t))
	waiter := locktest.NewClient(t, s.Client(t), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := holder.Acquire(ctx, "doc", 2*time.Second, core.Write())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan rwGot, 2)
	for range 2 {
		go func() {
			r, err := waiter.Acquire(ctx, "doc", time.Second, core.Read())
			got <- rwGot{r, err}
		}()
	}
	locktest.Eventually(t, 5*time.Second, "readers parked", func() bool { return core.WaitersParked(waiter) == 2 })
	_, replica := s.Servers()
	locktest.Eventually(t, 5*time.Second, "the writer replicated", func() bool {
		return replica.Do(t, "ZCARD", locktest.Key("doc", "rw")) == int64(1)
	})
	s.Failover(t)
	locktest.Eventually(t, 5*time.Second, "writer renewing on the new master", func() bool {
		d, err := w.TTL(ctx)
		return err == nil && d > time.Second
	})
	if w.Context().Err() != nil {
		t.Fatalf("writer lost across a clean failover: %v", context.Cause(w.Context()))
	}
	released := time.Now()
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := waitGot(t, got, 3*time.Second, "reader")
		if r.Fence() <= w.Fence() {
			t.Fatalf("reader's fence %d not above the writer's %d", r.Fence(), w.Fence())
		}
		defer r.Release(ctx)
	}
	t.Logf("readers granted %v after the writer's release", time.Since(released).Round(time.Millisecond))
}
