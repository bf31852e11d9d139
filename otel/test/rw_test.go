package otel_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// A read-write hold is traced as a lock, with its mode on lock.wait, lock.hold and lock.renew; a
// read nested in a write has its own lock.hold in read mode, and counts as no lock held more.
func TestHook_readWrite(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	// A TTL a loaded host renews in time (at 30 ms, CI's write lock expired before its renewal):
	// renewed every 100 ms.
	w, err := e.c.Acquire(ctx, "doc", 300*time.Millisecond, core.Write())
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.c.Acquire(w.Context(), "doc", time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	if got := e.sum(t, "lockkit.lock.held", set()); got != 1 {
		t.Errorf("held with a write and a nested read = %d, want 1", got)
	}
	locktest.Eventually(t, 5*time.Second, "a renewal", func() bool {
		for _, sp := range e.sr.Ended() {
			if sp.Name() == "lock.renew" {
				return true
			}
		}
		return false
	})
	_ = r.Release(ctx)
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	modes := map[string]int{}
	for _, sp := range e.sr.Ended() {
		switch sp.Name() {
		case "lock.wait", "lock.hold", "lock.renew":
			for _, kv := range sp.Attributes() {
				if kv.Key == "lockkit.lock.mode" {
					modes[sp.Name()+"/"+kv.Value.AsString()]++
				}
			}
		}
	}
	if modes["lock.wait/write"] != 1 || modes["lock.wait/read"] != 1 || modes["lock.hold/write"] != 1 ||
		modes["lock.hold/read"] != 1 || modes["lock.renew/write"] == 0 {
		t.Fatalf("spans by mode: %v", modes)
	}
	if got := e.sum(t, "lockkit.lock.held", set()); got != 0 {
		t.Errorf("held after release = %d, want 0", got)
	}
}
