package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// The read-only script (Inspect, sent with EVALSHA_RO) and Lock.TTL's owner checks of a lock and of
// a permit run on a Redis 7 cluster, with their keys in one slot, both from the script cache
// (EVALSHA, EVALSHA_RO) and after SCRIPT FLUSH (EVAL, EVAL_RO): TIME is allowed in a read-only
// script.
func TestScripts_noWritesFlag_cluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := locktest.NewClient(t, cl.Client(t))
	ctx := context.Background()
	for name, master := range namesOnEveryMaster(t, cl) {
		// One name, one lock: the lock first, then a permit of the same name.
		for _, opts := range [][]core.AcquireOption{nil, {core.Permits(2)}} {
			h, err := c.Acquire(ctx, name, 5*time.Second, opts...)
			if err != nil {
				t.Fatal(err)
			}
			for _, flushed := range []bool{false, true} {
				if flushed {
					master.Do(t, "SCRIPT", "FLUSH")
				}
				if d, err := h.TTL(ctx); err != nil || d <= 0 || d > 5*time.Second {
					t.Fatalf("%s: TTL (flushed %v, permit %v) = %v, %v", name, flushed, h.Limit() > 0, d, err)
				}
				info, err := c.Inspect(ctx, name)
				if err != nil || !info.Held || info.Fence != h.Fence() || len(info.Holders) != 1 || info.Holders[0].Fence != h.Fence() {
					t.Fatalf("%s: Inspect (flushed %v) = %+v, %v", name, flushed, info, err)
				}
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}
