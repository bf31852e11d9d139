package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// Through a Sentinel failover client: a lock held across a failover survives (it was replicated),
// renewals continue on the new master, and a waiter is still woken by the release.
func TestSentinel_failover(t *testing.T) {
	s := redistest.StartSentinel(t)
	holder := locktest.NewClient(t, s.Client(t))
	waiter := locktest.NewClient(t, s.Client(t), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "job", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Acquire(ctx, "job", time.Second)
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	locktest.Eventually(t, 5*time.Second, "waiter parked", func() bool { return core.WaitersParked(waiter) == 1 })
	_, replica := s.Servers()
	locktest.Eventually(t, 5*time.Second, "lock replicated", func() bool {
		return heldOn(t, replica, locktest.Key("job"))
	})
	s.Failover(t)
	if s.MasterAddr(t) != replica.Addr() {
		t.Fatalf("master is %s, want the former replica %s", s.MasterAddr(t), replica.Addr())
	}
	// The holder keeps the lock: its TTL is read (owner-checked) from the new master.
	locktest.Eventually(t, 5*time.Second, "holder renewing on the new master", func() bool {
		d, err := l.TTL(ctx)
		return err == nil && d > time.Second
	})
	if l.Context().Err() != nil {
		t.Fatalf("lock lost across a clean failover: %v", context.Cause(l.Context()))
	}
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
		t.Fatal("waiter not woken after the failover")
	}
}
