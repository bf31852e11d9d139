package core_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Issue #27, defect 1: a re-entry (through the lock's context, or WithOwner from another Client)
// after the lock was force-released or its key lost took the lock afresh, and the original hold
// kept renewing it: two live holders. A re-entry never takes a lock, and a hold renews only the
// acquisition it belongs to.
func TestReentry_afterLoss_neverTakesTheLock(t *testing.T) {
	const ttl = 900 * time.Millisecond
	losses := []struct {
		name string
		lose func(t *testing.T, srv *redistest.Server, c *core.Client)
	}{
		{"ForceRelease", func(t *testing.T, _ *redistest.Server, c *core.Client) {
			if ok, err := c.ForceRelease(context.Background(), "x"); err != nil || !ok {
				t.Fatalf("ForceRelease: %v %v", ok, err)
			}
		}},
		{"DEL", func(t *testing.T, srv *redistest.Server, _ *core.Client) { srv.Do(t, "DEL", locktest.Key("x")) }},
		{"FLUSHALL", func(t *testing.T, srv *redistest.Server, _ *core.Client) { srv.Do(t, "FLUSHALL") }},
	}
	for _, loss := range losses {
		for _, how := range []string{"context", "WithOwner"} {
			t.Run(loss.name+"/"+how, func(t *testing.T) {
				srv, _, a := setup(t)
				b := locktest.NewClient(t, srv.Client(t))
				other := locktest.NewClient(t, srv.Client(t))
				ctx := context.Background()
				held, err := a.Acquire(ctx, "x", ttl)
				if err != nil {
					t.Fatal(err)
				}
				loss.lose(t, srv, b)
				var in *core.Lock
				if how == "context" {
					in, err = a.Acquire(held.Context(), "x", ttl)
				} else {
					in, err = b.TryAcquire(ctx, "x", ttl, core.WithOwner(held.Token()))
				}
				if err == nil {
					t.Fatalf("the re-entry took the lock: reentrant %v, holds %d, fence %d (the hold's fence %d)",
						in.Holds() > 1, in.Holds(), in.Fence(), held.Fence())
				}
				if !errors.Is(err, core.ErrNotHeld) || !errors.Is(err, core.ErrLost) {
					t.Fatalf("re-entry after the loss: %v, want ErrNotHeld and ErrLost", err)
				}
				if lockHeld(t, srv.Client(t), locktest.Key("x")) {
					t.Fatal("the failed re-entry left the lock held")
				}
				// The original hold hears of the loss at its next renewal at the latest (at once when
				// it was the one re-entering).
				select {
				case <-held.Context().Done():
				case <-time.After(ttl/3 + 500*time.Millisecond):
					t.Fatal("the original hold's context is still live a renewal interval after its lock was lost")
				}
				if !errors.Is(context.Cause(held.Context()), core.ErrLost) {
					t.Fatalf("cause %v, want ErrLost", context.Cause(held.Context()))
				}
				if _, err := other.TryAcquire(ctx, "x", ttl); err != nil {
					t.Fatalf("another owner cannot take the lost lock: %v", err)
				}
			})
		}
	}
}

// Issue #27, defect 1, second half: a hold renews only the acquisition it belongs to. A fresh
// acquisition under the same token (WithToken, after a ForceRelease) is not the old hold's: the old
// hold's renewal, Extend and TTL say the lock is not its own.
func TestRenewal_onlyTheAcquisitionItBelongsTo(t *testing.T) {
	srv, _, a := setup(t)
	b := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	const tok = "task-42"
	old, err := a.Acquire(ctx, "y", 900*time.Millisecond, core.WithToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ForceRelease(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	fresh, err := b.Acquire(ctx, "y", 10*time.Second, core.WithToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Holds() > 1 || fresh.Fence() <= old.Fence() {
		t.Fatalf("WithToken after the loss: reentrant %v, fence %d (old %d): want a fresh acquisition", fresh.Holds() > 1, fresh.Fence(), old.Fence())
	}
	if _, err := old.TTL(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("TTL of the old hold: %v, want ErrNotHeld", err)
	}
	select {
	case <-old.Context().Done():
	case <-time.After(300*time.Millisecond + 500*time.Millisecond):
		t.Fatal("the old hold kept renewing the new acquisition under its token")
	}
	if d, err := fresh.TTL(ctx); err != nil || d < 5*time.Second {
		t.Fatalf("the fresh acquisition: TTL %v, %v", d, err)
	}
}

// Issue #27 (settled): a renewal that reaches Redis after its holder declared the lock expired
// re-extended the key, and nothing gave it back: the lock stayed held by nobody for a full TTL.
// The holds of a lock declared expired are given back.
func TestExpired_renewalThatArrivedIsGivenBack(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	late := &lateRenewals{}
	rdb.AddHook(late)
	holder := locktest.NewClient(t, rdb)
	other := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	const ttl = 600 * time.Millisecond
	l, err := holder.Acquire(ctx, "e", ttl)
	if err != nil {
		t.Fatal(err)
	}
	// From now on every renewal runs in Redis (and lengthens the key), but its reply never comes
	// before the hold's validity deadline.
	late.on.Store(true)
	<-l.Context().Done()
	if !errors.Is(context.Cause(l.Context()), core.ErrLost) {
		t.Fatalf("cause %v, want a loss", context.Cause(l.Context()))
	}
	lost := time.Now()
	if late.ran.Load() == 0 {
		t.Fatal("no renewal ran in Redis: the test proves nothing")
	}
	for {
		m, err := other.TryAcquire(ctx, "e", time.Second)
		if err == nil {
			t.Logf("taken by another owner %v after the holder was told it expired", time.Since(lost).Round(time.Millisecond))
			_ = m.Release(ctx)
			return
		}
		if time.Since(lost) > ttl/2 {
			t.Fatalf("the lock declared expired is still held in Redis %v later: %v", time.Since(lost).Round(time.Millisecond), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lateRenewals, once on, lets each pipeline (the watchdog's renewals) run in Redis and then holds
// its reply back until the caller's context ends: a reply that comes too late.
type lateRenewals struct {
	on  atomic.Bool
	ran atomic.Int64
}

func (h *lateRenewals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *lateRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if !h.on.Load() || err != nil {
			return err
		}
		h.ran.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}
}

// The checker's failover variant (seed 2) found a permit holder that renewed a lease it did not
// hold: a failover lost its permit but brought back the waiter place it had queued before, a later
// release granted that place a new lease (a new fence), and the holder's renewals, which checked
// only the token, carried on with it. A permit's renewal, Extend and TTL match its fence too.
func TestPermits_renewalOnlyTheLeaseItBelongsTo(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	p, err := c.Acquire(ctx, "pf", 900*time.Millisecond, core.Permits(2))
	if err != nil {
		t.Fatal(err)
	}
	// Redis now records another lease under the holder's token: a new fence, as a grant writes it.
	tok := p.Token()
	if err := rdb.HSet(ctx, locktest.Key("pf", "permits", "fences"), tok, strconv.FormatInt(p.Fence()+1000, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.TTL(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("TTL of a permit whose lease Redis gave another fence: %v, want ErrNotHeld", err)
	}
	if err := p.Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Extend: %v, want ErrNotHeld", err)
	}
	select {
	case <-p.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the holder kept renewing a lease of another fence")
	}
}
