package core_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

func digestOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])[:12]
}

// checkHolder checks what Inspect says about l's holder.
func checkHolder(t *testing.T, info core.LockInfo, l *core.Lock, holds int64, label string) {
	t.Helper()
	if !info.Held || len(info.Holders) != 1 {
		t.Fatalf("info = %+v, want held by one holder", info)
	}
	h := info.Holders[0]
	host, _ := os.Hostname()
	if h.Digest != digestOf(l.Token()) || h.Holds != holds || h.Host != host || h.PID != os.Getpid() || h.Label != label {
		t.Fatalf("holder = %+v, want digest %s, %d holds, %s/%d/%q", h, digestOf(l.Token()), holds, host, os.Getpid(), label)
	}
	if d := time.Since(h.Acquired); d < -time.Second || d > 5*time.Second || h.HeldFor < 0 || h.HeldFor > 5*time.Second {
		t.Fatalf("acquired %v (%v ago), held for %v", h.Acquired, d, h.HeldFor)
	}
	if info.Fence != l.Fence() || info.TTL <= 0 || info.TTL > l.Context().Value(ttlKey{}).(time.Duration) {
		t.Fatalf("fence %d (want %d), TTL %v", info.Fence, l.Fence(), info.TTL)
	}
}

type ttlKey struct{}

// Inspect reports holder, holds, label, since when, TTL, fence and fair waiters; reading changes
// nothing; a free lock reports the last fence.
func TestInspect_heldFreeAndReadOnly(t *testing.T) {
	_, rdb, c := setup(t, core.WithLabel("billing worker"))
	other := locktest.NewClient(t, rdb)
	// A TTL long enough that no renewal (at a third of it) falls between the reads below.
	ctx := context.WithValue(context.Background(), ttlKey{}, 30*time.Second)
	l, err := c.Acquire(ctx, "invoice:42", 30*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Acquire(l.Context(), "invoice:42", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		_, err := other.Acquire(wctx, "invoice:42", time.Second, core.Fair())
		waited <- err
	}()
	locktest.Eventually(t, 2*time.Second, "a fair waiter queued", func() bool {
		info, err := c.Inspect(ctx, "invoice:42")
		return err == nil && info.Queued == 1
	})
	before, _ := rdb.Get(ctx, l.Key()).Result()
	pttl := rdb.PTTL(ctx, l.Key()).Val()
	info, err := other.Inspect(ctx, "invoice:42")
	if err != nil {
		t.Fatal(err)
	}
	checkHolder(t, info, l, 2, "billing worker")
	if info.Name != "invoice:42" || info.Key != l.Key() || info.Queued != 1 {
		t.Fatalf("info = %+v", info)
	}
	after, _ := rdb.Get(ctx, l.Key()).Result()
	if !reflect.DeepEqual(before, after) || rdb.PTTL(ctx, l.Key()).Val() > pttl {
		t.Fatal("Inspect changed the lock")
	}
	stop()
	<-waited
	_ = inner.Release(ctx)
	_ = l.Release(ctx)
	info, err = c.Inspect(ctx, "invoice:42")
	if err != nil {
		t.Fatal(err)
	}
	if info.Held || len(info.Holders) != 0 || info.TTL != 0 || info.Fence != l.Fence() {
		t.Fatalf("after release: %+v, want free with the last fence %d", info, l.Fence())
	}
	if _, err := c.Inspect(ctx, ""); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("empty name: %v", err)
	}
}

// A force-released holder's context is cancelled within one renewal interval with a LostError
// (not_owner), its Release answers ErrNotHeld, and a waiter is woken promptly by the release
// message (long before the holder's TTL or its backoff would let it in).
func TestForceRelease_holderLosesWaiterWoken(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "fair"}[fair], func(t *testing.T) {
			_, rdb, c := setup(t)
			waiter := locktest.NewClient(t, rdb, core.WithRetryBackoff(5*time.Second, 10*time.Second))
			operator := locktest.NewClient(t, rdb)
			forceRelease(t, c, waiter, operator, fair)
		})
	}
}

func forceRelease(t *testing.T, c, waiter, operator *core.Client, fair bool) {
	ctx := context.Background()
	const ttl = 3 * time.Second
	interval := ttl / 3
	var opts []core.AcquireOption
	if fair {
		opts = append(opts, core.Fair())
	}
	l, err := c.Acquire(ctx, "stuck", ttl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		w, err := waiter.Acquire(ctx, "stuck", ttl, opts...)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- time.Now()
		_ = w.Release(ctx)
	}()
	locktest.Eventually(t, 2*time.Second, "the waiter parked", func() bool { return core.WaitersParked(waiter) == 1 })
	if fair {
		locktest.Eventually(t, 2*time.Second, "the waiter queued", func() bool {
			info, err := operator.Inspect(ctx, "stuck")
			return err == nil && info.Queued == 1
		})
	}
	forced := time.Now()
	ok, err := operator.ForceRelease(ctx, "stuck")
	if err != nil || !ok {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	select {
	case at, ok := <-got:
		if !ok {
			t.Fatal("waiter failed")
		}
		t.Logf("waiter acquired %v after the forced release", at.Sub(forced))
		if d := at.Sub(forced); d > 500*time.Millisecond {
			t.Fatalf("waiter acquired %v after the forced release", d)
		}
	case <-time.After(ttl):
		t.Fatal("waiter not woken by the forced release")
	}
	select {
	case <-l.Context().Done():
	case <-time.After(interval + time.Second):
		t.Fatal("holder's context not cancelled")
	}
	t.Logf("holder's context cancelled %v after the forced release (renewal interval %v)", time.Since(forced), interval)
	if d := time.Since(forced); d > interval+200*time.Millisecond {
		t.Fatalf("holder's context cancelled %v after the forced release, want within %v", d, interval)
	}
	var lost *core.LostError
	if cause := context.Cause(l.Context()); !errors.As(cause, &lost) || lost.Reason != "not_owner" {
		t.Fatalf("cause = %v, want a LostError not_owner", cause)
	}
	if err := l.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Release after force = %v, want ErrNotHeld", err)
	}
	locktest.Eventually(t, 2*time.Second, "the waiter's release", func() bool {
		info, err := operator.Inspect(ctx, "stuck")
		return err == nil && !info.Held
	})
	if ok, err := operator.ForceRelease(ctx, "stuck"); err != nil || ok {
		t.Fatalf("ForceRelease of a free lock = %v, %v", ok, err)
	}
}

// Inspect and ForceRelease on a cluster (each name's master) and on Redlock (the quorum's view).
func TestInspect_clusterAndRedlock(t *testing.T) {
	ctx := context.WithValue(context.Background(), ttlKey{}, 5*time.Second)
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		c := locktest.NewClient(t, cl.Client(t), core.WithLabel("c"))
		for name := range namesOnEveryMaster(t, cl) {
			l, err := c.Acquire(ctx, name, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Inspect(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			checkHolder(t, info, l, 1, "c")
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			p, err := c.Acquire(ctx, name, 5*time.Second, core.Permits(2))
			if err != nil {
				t.Fatal(err)
			}
			info, err = c.Inspect(ctx, name)
			if err != nil || len(info.Permits) != 1 || info.Permits[0].Digest != digestOf(p.Token()) || info.Limit != 2 {
				t.Fatalf("permits on a cluster: %+v, %v", info, err)
			}
			if ok, err := c.ForceRelease(ctx, name); !ok || err != nil {
				t.Fatalf("ForceRelease: %v %v", ok, err)
			}
			if info, err := c.Inspect(ctx, name); err != nil || info.Held || len(info.Permits) != 0 {
				t.Fatalf("after force: %+v %v", info, err)
			}
		}
	})
	t.Run("redlock", func(t *testing.T) {
		srvs := redistest.StartN(t, 3)
		c := redlockClient(t, srvs, core.WithLabel("r"))
		l, err := c.Acquire(ctx, "rl", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// One node loses its copy: a quorum still says held. (The node to lose it is one that
		// granted the lock late, if any: its copy may record a later fence than the holder's.)
		gone := 0
		for i, s := range srvs {
			if stateOn(t, s, l.Key()).Fence != l.Fence() {
				gone = i
			}
		}
		srvs[gone].Do(t, "DEL", l.Key())
		info, err := c.Inspect(ctx, "rl")
		if err != nil {
			t.Fatal(err)
		}
		checkHolder(t, info, l, 1, "r")
		srvs[(gone+1)%3].Do(t, "DEL", l.Key())
		if info, err := c.Inspect(ctx, "rl"); err != nil || info.Held {
			t.Fatalf("one copy left of three: %+v, %v; want not held", info, err)
		}
		if ok, err := c.ForceRelease(ctx, "rl"); !ok || err != nil {
			t.Fatalf("ForceRelease: %v %v", ok, err)
		}
		srvs[(gone+1)%3].Stop(t)
		srvs[(gone+2)%3].Stop(t)
		if _, err := c.Inspect(ctx, "rl"); !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("two nodes of three down: %v, want ErrUnavailable", err)
		}
	})
}
