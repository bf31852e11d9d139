package core_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// Inspect lists a semaphore's permits (digest, fence, lease, since when, host/pid/label), its limit
// and its fair waiters: the name is held in mode "permit" by both holders; reading changes nothing.
func TestInspect_permits(t *testing.T) {
	_, rdb, c := setup(t, core.WithLabel("limiter"))
	other := locktest.NewClient(t, rdb)
	ctx := context.Background()
	const ttl = 30 * time.Second
	a, err := c.Acquire(ctx, "pool", ttl, core.Permits(2), core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	b, err := other.Acquire(ctx, "pool", ttl, core.Permits(3))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	waited := make(chan error, 1)
	go func() {
		_, err := other.Acquire(wctx, "pool", ttl, core.Permits(2), core.Fair())
		waited <- err
	}()
	locktest.Eventually(t, 2*time.Second, "a fair permit waiter queued", func() bool {
		info, err := c.Inspect(ctx, "pool")
		return err == nil && info.PermitsQueued == 1
	})
	permits := a.Key()
	before, _ := rdb.ZRangeWithScores(ctx, permits, 0, -1).Result()
	info, err := other.Inspect(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Mode != "permit" || !reflect.DeepEqual(info.Holders, info.Permits) || info.Limit != 2 ||
		len(info.Permits) != 2 || info.Queued != 0 || info.Fence != max(a.Fence(), b.Fence()) {
		t.Fatalf("info = %+v, want the name held by 2 permits of limit 2", info)
	}
	host, _ := os.Hostname()
	// Earliest lease expiry first; a and b may expire within the same millisecond, and then either
	// order is right, so each permit is found by its digest.
	if info.Permits[0].TTL > info.Permits[1].TTL {
		t.Fatalf("permits %+v are not in lease-expiry order", info.Permits)
	}
	byDigest := map[string]core.HolderInfo{}
	for _, h := range info.Permits {
		byDigest[h.Digest] = h
	}
	for i, want := range []struct {
		l     *core.Lock
		label string
	}{{a, "limiter"}, {b, ""}} {
		h := byDigest[digestOf(want.l.Token())]
		if h.Digest != digestOf(want.l.Token()) || h.Holds != 1 || h.Fence != want.l.Fence() ||
			h.Host != host || h.PID != os.Getpid() || h.Label != want.label {
			t.Fatalf("permit %d = %+v, want digest %s fence %d label %q", i, h, digestOf(want.l.Token()), want.l.Fence(), want.label)
		}
		if h.TTL <= ttl-5*time.Second || h.TTL > ttl || h.HeldFor < 0 || h.HeldFor > 5*time.Second ||
			time.Since(h.Acquired) > 5*time.Second {
			t.Fatalf("permit %d = %+v: lease or acquisition time off", i, h)
		}
	}
	after, _ := rdb.ZRangeWithScores(ctx, permits, 0, -1).Result()
	if !reflect.DeepEqual(before, after) {
		t.Fatal("Inspect changed the leases")
	}
	stop()
	<-waited
	_ = a.Release(ctx)
	_ = b.Release(ctx)
	info, err = c.Inspect(ctx, "pool")
	if err != nil || len(info.Permits) != 0 || info.Limit != 0 || info.Fence != b.Fence() {
		t.Fatalf("after release: %+v, %v; want no permits, the last fence %d", info, err, b.Fence())
	}
	if n, _ := rdb.Exists(ctx, permits+":fences").Result(); n != 0 {
		t.Fatal("the permits' labels outlived them")
	}
}

// ForceRelease deletes every permit of a semaphore: each holder's context is cancelled within one
// renewal interval (LostError not_owner, Release answers ErrNotHeld), and the waiters are woken by
// the release messages, one per freed permit, long before their backoff would let them try.
func TestForceRelease_permits(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "fair"}[fair], func(t *testing.T) {
			_, rdb, c := setup(t)
			waiter := locktest.NewClient(t, rdb, core.WithRetryBackoff(5*time.Second, 10*time.Second))
			operator := locktest.NewClient(t, rdb)
			ctx := context.Background()
			const ttl = 3 * time.Second
			opts := []core.AcquireOption{core.Permits(2)}
			if fair {
				opts = append(opts, core.Fair())
			}
			var held []*core.Lock
			for range 2 {
				l, err := c.Acquire(ctx, "pool", ttl, opts...)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, l)
			}
			got := make(chan time.Time, 2)
			for range 2 {
				go func() {
					w, err := waiter.Acquire(ctx, "pool", ttl, opts...)
					if err != nil {
						t.Error(err)
						got <- time.Time{}
						return
					}
					got <- time.Now()
					<-time.After(100 * time.Millisecond) // both permits held at once, then given back
					_ = w.Release(ctx)
				}()
			}
			locktest.Eventually(t, 2*time.Second, "both waiters parked", func() bool { return core.WaitersParked(waiter) == 2 })
			forced := time.Now()
			if ok, err := operator.ForceRelease(ctx, "pool"); err != nil || !ok {
				t.Fatalf("ForceRelease = %v, %v", ok, err)
			}
			for range 2 {
				if d := (<-got).Sub(forced); d < 0 || d > 500*time.Millisecond {
					t.Fatalf("a waiter acquired %v after the forced release", d)
				}
			}
			for _, l := range held {
				select {
				case <-l.Context().Done():
				case <-time.After(ttl/3 + time.Second):
					t.Fatal("a holder's context was not cancelled")
				}
				var lost *core.LostError
				if cause := context.Cause(l.Context()); !errors.As(cause, &lost) || lost.Reason != "not_owner" {
					t.Fatalf("cause = %v, want a LostError not_owner", cause)
				}
				if err := l.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
					t.Fatalf("Release after force = %v, want ErrNotHeld", err)
				}
			}
			if d := time.Since(forced); d > ttl/3+200*time.Millisecond {
				t.Fatalf("holders' contexts cancelled %v after the forced release, want within %v", d, ttl/3)
			}
			locktest.Eventually(t, 2*time.Second, "the waiters' releases", func() bool {
				info, err := operator.Inspect(ctx, "pool")
				return err == nil && len(info.Permits) == 0
			})
			if ok, err := operator.ForceRelease(ctx, "pool"); err != nil || ok {
				t.Fatalf("ForceRelease of a free semaphore = %v, %v", ok, err)
			}
		})
	}
}

// Inspect and ForceRelease take the full name of a lock in a namespace (an adapter's, an
// election's), and refuse '@' names that are not namespaced names.
func TestInspect_namespacedNames(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "report", 30*time.Second, core.InNamespace("cron"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Inspect(ctx, core.Namespaced("cron", "report"))
	if err != nil || !info.Held || info.Key != l.Key() || info.Holders[0].Fence != l.Fence() {
		t.Fatalf("Inspect(@cron/report) = %+v, %v", info, err)
	}
	if ok, err := c.ForceRelease(ctx, "@cron/report"); !ok || err != nil {
		t.Fatalf("ForceRelease(@cron/report) = %v, %v", ok, err)
	}
	for _, bad := range []string{"@", "@cron", "@cron/", "@/x", "@Cron/x", "@cr on/x"} {
		if _, err := c.Inspect(ctx, bad); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("Inspect(%q) = %v, want ErrInvalid", bad, err)
		}
		if _, err := c.ForceRelease(ctx, bad); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("ForceRelease(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
