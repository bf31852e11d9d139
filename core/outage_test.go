package core_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// With Redis down, acquisitions that fail to dial were never sent: nothing is given back, and
// Close does not wait for go-redis's dials (it took the failed acquisitions' TTL, up to 5 s, and
// logged a failed give-back per acquisition). Losing Redis and finding it back are logged once
// each, not once per request.
//
// Close's bound is 200 ms; the test does not time that, which a loaded CI host stretches (845 ms
// once, beside the checker): while Close runs, go-redis waits 10 s between dial attempts, so a
// Close that waited for a dial would take 10 s, and the test allows 3 s.
func TestOutage_closeIsShortAndQuiet(t *testing.T) {
	srv := redistest.Start(t)
	o := srv.Options()
	o.DialTimeout = 300 * time.Millisecond
	var slowDials atomic.Bool
	o.DialerRetryBackoff = func(int) time.Duration {
		if slowDials.Load() {
			return 10 * time.Second
		}
		return 100 * time.Millisecond // (go-redis's default)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	var out locktest.SyncBuffer
	c := locktest.NewClient(t, rdb, core.WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
	ctx := context.Background()
	failAll := func() {
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if _, err := c.TryAcquire(ctx, "down", 3*time.Second); !errors.Is(err, core.ErrUnavailable) {
					t.Errorf("acquisition with Redis down: %v", err)
				}
			})
		}
		wg.Wait()
	}
	srv.Stop(t)
	failAll()
	srv.Restart(t)
	locktest.Eventually(t, 5*time.Second, "go-redis dials again", func() bool { return rdb.Ping(ctx).Err() == nil })
	if _, err := c.Acquire(ctx, "held", 10*time.Second); err != nil { // Redis answers again
		t.Fatal(err)
	}
	srv.Stop(t)
	failAll()
	slowDials.Store(true)
	start := time.Now()
	err := c.Close(ctx)
	took := time.Since(start)
	t.Logf("Close with Redis down took %v (%v); log:\n%s", took, err, out.String())
	if limit := 3 * time.Second; took > limit {
		t.Errorf("Close took %v with Redis down, want at most %v: it waited for go-redis's dials", took, limit)
	}
	log := out.String()
	if n := strings.Count(log, "giving a lock back failed"); n > 0 {
		t.Errorf("%d give-backs logged for acquisitions never sent", n)
	}
	if lost, back := strings.Count(log, "cannot reach Redis"), strings.Count(log, "Redis answers again"); lost != 2 || back != 1 {
		t.Errorf("Redis lost twice and back once: logged %d and %d times", lost, back)
	}
	if n := strings.Count(log, "\n"); n != 3 {
		t.Errorf("%d lines logged, want 3", n)
	}
}
