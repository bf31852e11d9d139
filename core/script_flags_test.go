package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
)

// The scripts flagged no-writes (Inspect; Lock.TTL of a lock and of a permit) run on a Redis 7
// cluster, where a flagged script must declare its keys and keep them in one slot, both from the
// script cache (EVALSHA, EVALSHA_RO) and after SCRIPT FLUSH (EVAL, EVAL_RO): the script's TIME
// is allowed in a no-writes script.
func TestScripts_noWritesFlag_cluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := newClient(t, cl.Client(t))
	ctx := context.Background()
	for name, master := range namesOnEveryMaster(t, cl) {
		l, err := c.Acquire(ctx, name, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Acquire(ctx, name, 5*time.Second, core.Permits(2))
		if err != nil {
			t.Fatal(err)
		}
		for _, flushed := range []bool{false, true} {
			if flushed {
				master.Do(t, "SCRIPT", "FLUSH")
			}
			for _, h := range []*core.Lock{l, p} {
				if d, err := h.TTL(ctx); err != nil || d <= 0 || d > 5*time.Second {
					t.Fatalf("%s: TTL (flushed %v, permit %v) = %v, %v", name, flushed, h.Limit() > 0, d, err)
				}
			}
			info, err := c.Inspect(ctx, name)
			if err != nil || !info.Held || info.Fence != l.Fence() || len(info.Permits) != 1 || info.Permits[0].Fence != p.Fence() {
				t.Fatalf("%s: Inspect (flushed %v) = %+v, %v", name, flushed, info, err)
			}
		}
		for _, h := range []*core.Lock{l, p} {
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}
