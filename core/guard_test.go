package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// hostileGuards contain "{name}" but hash elsewhere (Redis hashes the first non-empty {…}).
var hostileGuards = []string{"x{a}{order-1}", "{}{order-1}", "{{order-1}", "lockkit:idem:order-1"}

// Issue #16, defect 8: guard and ReleaseSet keys whose first hash tag is not the lock's are
// rejected before anything is sent (they would fail with CROSSSLOT on a cluster).
func TestGuard_hostileKeys_rejectedBeforeSending(t *testing.T) {
	srv, _, c := setup(t)
	ctx := context.Background()
	l, err := c.TryAcquire(ctx, "order-1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv.ResetStats(t)
	for _, g := range hostileGuards {
		if _, err := c.TryAcquire(ctx, "order-1", time.Second, core.WithGuard(g)); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("WithGuard(%q) = %v, want ErrInvalid", g, err)
		}
		if err := l.ReleaseSet(ctx, g, []byte("v"), time.Minute); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("ReleaseSet(%q) = %v, want ErrInvalid", g, err)
		}
	}
	if st := srv.CommandStats(t); st["evalsha"]+st["eval"] != 0 {
		t.Fatalf("hostile keys reached Redis: %v", st)
	}
	if err := l.ReleaseSet(ctx, "lockkit:idem:{order-1}{x}", []byte("v"), time.Minute); err != nil {
		t.Fatalf("valid key: %v", err)
	}
}

// Issue #16, defect 8, on a cluster: a guard key in the lock's slot works; one whose first hash
// tag is another slot's is rejected with ErrInvalid before anything is sent.
func TestCluster_guardKeySlotChecked(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := locktest.NewClient(t, cl.Client(t))
	ctx := context.Background()
	const name, guard = "order-1", "lockkit:idem:{order-1}"
	l, err := c.TryAcquire(ctx, name, time.Second, core.WithGuard(guard))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ReleaseSet(ctx, guard, []byte("done"), time.Minute); err != nil {
		t.Fatal(err)
	}
	var ge *core.GuardedError
	if _, err := c.TryAcquire(ctx, name, time.Second, core.WithGuard(guard)); !errors.As(err, &ge) || ge.Value != "done" {
		t.Fatalf("replay: %v", err)
	}
	l, err = c.TryAcquire(ctx, name, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for _, n := range cl.Nodes() {
		n.ResetStats(t)
	}
	for _, g := range hostileGuards {
		if _, err := c.TryAcquire(ctx, name, time.Second, core.WithGuard(g)); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("WithGuard(%q) on a cluster = %v, want ErrInvalid", g, err)
		}
		if err := l.ReleaseSet(ctx, g, []byte("v"), time.Minute); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("ReleaseSet(%q) on a cluster = %v, want ErrInvalid", g, err)
		}
	}
	for _, n := range cl.Nodes() {
		if st := n.CommandStats(t); st["evalsha"]+st["eval"] != 0 {
			t.Fatalf("hostile keys reached %s: %v", n.Addr(), st)
		}
	}
}
