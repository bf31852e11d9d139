package core_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
)

// Issue #16, defect 10: WithReplicaAck covers fair and guarded acquisitions and ReleaseSet (the
// idempotency records and cron markers), not only plain acquisitions.
func TestReplicaAck_fairGuardedAndReleaseSet(t *testing.T) {
	srvs := redistest.StartN(t, 2)
	master, replica := srvs[0], srvs[1]
	replica.Do(t, "REPLICAOF", "127.0.0.1", strconv.Itoa(master.Port()))
	eventually(t, 20*time.Second, "replica in sync, as both sides see it", func() bool {
		info, _ := replica.Do(t, "INFO", "replication").(string)
		minfo, _ := master.Do(t, "INFO", "replication").(string)
		return strings.Contains(info, "master_link_status:up") && strings.Contains(minfo, "state=online")
	})
	c := newClient(t, master.Client(t), core.WithReplicaAck(1, time.Second)) // generous: a loaded machine
	ctx := context.Background()

	// Healthy replica: each call is on the replica when it returns (WAIT counted it there).
	l, err := c.TryAcquire(ctx, "f", time.Second, core.Fair())
	if err != nil {
		t.Fatalf("fair: %v", err)
	}
	if !heldOn(t, replica, "lockkit:{f}") {
		t.Fatal("fair acquisition returned before the replica had it")
	}
	_ = l.Release(ctx)
	const guard = "lockkit:idem:{g}"
	l, err = c.TryAcquire(ctx, "g", time.Second, core.WithGuard(guard))
	if err != nil {
		t.Fatalf("guarded: %v", err)
	}
	if !heldOn(t, replica, "lockkit:{g}") {
		t.Fatal("guarded acquisition returned before the replica had it")
	}
	if err := l.ReleaseSet(ctx, guard, []byte("done"), time.Minute); err != nil {
		t.Fatalf("ReleaseSet: %v", err)
	}
	if replica.Do(t, "GET", guard) != "done" {
		t.Fatal("ReleaseSet returned before the replica had the value")
	}
	held, err := c.TryAcquire(ctx, "r", time.Minute, core.WithGuard("lockkit:idem:{r}"))
	if err != nil {
		t.Fatal(err)
	}

	// Replica stopped: too few acknowledgements.
	replica.Pause(t)
	defer replica.Resume(t)
	for _, tc := range []struct {
		name string
		opt  core.AcquireOption
	}{{"f2", core.Fair()}, {"g2", core.WithGuard("lockkit:idem:{g2}")}} {
		if _, err := c.TryAcquire(ctx, tc.name, time.Second, tc.opt); !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("%s with the replica stopped: %v, want ErrUnavailable", tc.name, err)
		}
		if heldOn(t, master, "lockkit:{"+tc.name+"}") {
			t.Fatalf("%s: an unacknowledged lock was left behind", tc.name)
		}
	}
	err = held.ReleaseSet(ctx, "lockkit:idem:{r}", []byte("v"), time.Minute)
	if !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "failover") {
		t.Fatalf("ReleaseSet with the replica stopped: %v, want ErrUnavailable about a failover", err)
	}
	t.Logf("ReleaseSet with the replica stopped: %v", err)
	if master.Do(t, "GET", "lockkit:idem:{r}") != "v" || heldOn(t, master, "lockkit:{r}") {
		t.Fatal("ReleaseSet without acknowledgement must still write the value and release the lock")
	}
	if !errors.Is(context.Cause(held.Context()), core.ErrReleased) {
		t.Fatalf("cause %v, want ErrReleased", context.Cause(held.Context()))
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release after the unacknowledged ReleaseSet: %v, want nil (released)", err)
	}
}
