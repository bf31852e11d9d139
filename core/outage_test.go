package core_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
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
// once, beside the checker): while Close runs, go-redis retries a failed dial only 3 s after Close
// began (and at once from then on, so that its dialling goroutines end before the leak check), so
// a Close that waited for a dial would take 3 s, and the test allows 2 s. (Close waited so for a
// renewal in flight, up to that lock's validity deadline: 7.3 s in 8 of 15 runs.)
func TestOutage_closeIsShortAndQuiet(t *testing.T) {
	srv := redistest.Start(t)
	o := srv.Options()
	o.DialTimeout = 300 * time.Millisecond
	var slowUntil atomic.Int64 // Unix ns; 0: go-redis's default backoff
	o.DialerRetryBackoff = backOffUntil(&slowUntil)
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
	start := time.Now()
	slowUntil.Store(start.Add(3 * time.Second).UnixNano())
	err := c.Close(ctx)
	took := time.Since(start)
	t.Logf("Close with Redis down took %v (%v); log:\n%s", took, err, out.String())
	if limit := 2 * time.Second; took > limit {
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

// Close does not wait past its context for a renewal in flight. Redis stops while a lock is held;
// its next renewal finds no connection and waits for go-redis's next dial, held back 3 s. A Close
// given 300 ms returns then (it waited for that renewal until the lock's validity deadline: over
// 3 s here, until the dial; 7.3 s in 8 of 15 runs of the test above).
func TestOutage_closeDoesNotWaitForARenewal(t *testing.T) {
	srv := redistest.Start(t)
	o := srv.Options()
	var down atomic.Bool
	var slowUntil atomic.Int64 // Unix ns: set by the first dial after Redis stopped
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if down.Load() {
			slowUntil.CompareAndSwap(0, time.Now().Add(3*time.Second).UnixNano())
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	o.DialerRetryBackoff = backOffUntil(&slowUntil)
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	c := locktest.NewClient(t, rdb)
	if _, err := c.Acquire(context.Background(), "renewed", 6*time.Second); err != nil { // renewed every 2 s
		t.Fatal(err)
	}
	srv.Stop(t)
	down.Store(true)
	locktest.Eventually(t, 5*time.Second, "the renewal dialling Redis", func() bool { return slowUntil.Load() != 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Close(ctx)
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("Close(300 ms) took %v (%v) with a renewal waiting for a dial", took, err)
	}
}

// backOffUntil is a go-redis DialerRetryBackoff: while *until (Unix ns) is 0, go-redis's default
// 100 ms; then a failed dial is retried only at that instant, and at once after it.
func backOffUntil(until *atomic.Int64) func(int) time.Duration {
	return func(int) time.Duration {
		if u := until.Load(); u != 0 {
			return max(time.Until(time.Unix(0, u)), 0)
		}
		return 100 * time.Millisecond
	}
}
