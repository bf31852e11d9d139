package otel_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
)

// A permit is traced as a lock, with the semaphore's limit on lock.wait, lock.hold and lock.renew.
func TestHook_permit(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	p, err := e.c.Acquire(ctx, "pool", 30*time.Millisecond, core.Permits(3))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "a renewal", func() bool { return len(e.sr.Ended()) > 1 })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"lock.wait", "lock.hold"} {
		wantAttrs(t, s, e.only(t, s).Attributes(), map[string]string{"lockkit.lock.permits": "3", "lockkit.lock.name": "pool"})
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
