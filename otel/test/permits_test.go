package otel_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// A permit is traced as a lock, with the semaphore's limit on lock.wait, lock.hold and lock.renew.
func TestHook_permit(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	p, err := e.c.Acquire(ctx, "pool", 300*time.Millisecond, core.Permits(3)) // (renewed every 100 ms; 30 ms was lost before its first renewal beside two CI runs)
	if err != nil {
		t.Fatal(err)
	}
	q, err := e.c.Acquire(ctx, "pool", time.Second, core.Permits(3))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.sum(t, "lockkit.lock.held", set()); got != 2 {
		t.Errorf("held with two permits = %d, want 2", got)
	}
	_ = q.Release(ctx)
	locktest.Eventually(t, 5*time.Second, "a renewal", func() bool {
		for _, sp := range e.sr.Ended() {
			if sp.Name() == "lock.renew" {
				return true
			}
		}
		return false
	})
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, sp := range e.sr.Ended() {
		if sp.Name() == "lock.wait" || sp.Name() == "lock.hold" {
			wantAttrs(t, sp.Name(), sp.Attributes(), map[string]string{"lockkit.lock.permits": "3", "lockkit.lock.name": "pool"})
		}
	}
	for _, sp := range e.sr.Ended() {
		if sp.Name() == "lock.renew" {
			wantAttrs(t, "lock.renew", sp.Attributes(), map[string]string{"lockkit.lock.permits": "3"})
		}
	}
	if got := e.sum(t, "lockkit.lock.held", set()); got != 0 {
		t.Errorf("held after release = %d, want 0", got)
	}
}
