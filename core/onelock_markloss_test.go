package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// One name, one lock, when the name's lock key is lost alone (evicted, deleted, or lost in a
// failover) while permits, reads or a write hold the name: the key held their family's mark, which
// is what kept every other kind out, so their holds are lost as a lock's is when its key goes. The
// next renewal says so (their context is cancelled with a LostError "not_owner"), Extend and
// Release answer ErrNotHeld, and nothing they send disturbs the kind granted after them.

// marklossKinds are the holds whose mark a test deletes, each with a kind it excludes.
var marklossKinds = []struct {
	mode, other     string
	opts, otherOpts []core.AcquireOption
}{
	{"permit", "read", []core.AcquireOption{core.Permits(3)}, []core.AcquireOption{core.Read()}},
	{"read", "permit", []core.AcquireOption{core.Read()}, []core.AcquireOption{core.Permits(3)}},
	{"write", "lock", []core.AcquireOption{core.Write()}, nil},
}

// markKey is the lock key of name (the default prefix): the key that holds a family's mark. (A
// permit's or a read-write hold's Key is its family's leases.)
func markKey(name string) string { return locktest.Key(name) }

// marklossTTL is the TTL of the holds whose mark is deleted: renewed every 100 ms.
const marklossTTL = 300 * time.Millisecond

// waitLost waits for the context of l (a hold of mode) to end after its lock key was deleted at
// del, and checks that it ended within a renewal interval (plus scheduling slack) with a LostError
// "not_owner".
func waitLost(t *testing.T, mode string, l *core.Lock, del time.Time) {
	t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatalf("the %s's context is still live 2 s after its lock key was deleted (its renewals go on)", mode)
	}
	if took, interval := time.Since(del), marklossTTL/3; took > interval+150*time.Millisecond {
		t.Fatalf("the %s's loss was heard %v after the DEL, want within a renewal interval (%v)", mode, took, interval)
	}
	var le *core.LostError
	if !errors.As(context.Cause(l.Context()), &le) || le.Reason != "not_owner" {
		t.Fatalf("the %s's context ended with %v, want a LostError not_owner", mode, context.Cause(l.Context()))
	}
}

// holdsOnly checks that Inspect reports the name held by one holder of mode, of fence fence.
func holdsOnly(t *testing.T, c *core.Client, name, mode string, fence int64) {
	t.Helper()
	info, err := c.Inspect(context.Background(), name)
	if err != nil || !info.Held || info.Mode != mode || len(info.Holders) != 1 || info.Holders[0].Fence != fence {
		t.Fatalf("Inspect: %+v, %v; want held by one %s of fence %d", info, err, mode, fence)
	}
}

// The hold whose mark is deleted hears of it at its next renewal; the kind it excluded is then
// granted, alone, with a fence above the lost hold's.
func TestOneLock_markLoss_holdLostAtItsNextRenewal(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	for _, k := range marklossKinds {
		t.Run(k.mode, func(t *testing.T) {
			name := "markloss/" + k.mode
			h, err := c.Acquire(ctx, name, marklossTTL, k.opts...)
			if err != nil {
				t.Fatal(err)
			}
			del := time.Now()
			if err := rdb.Del(ctx, markKey(name)).Err(); err != nil {
				t.Fatal(err)
			}
			waitLost(t, k.mode, h, del)
			o, err := c.TryAcquire(ctx, name, time.Minute, k.otherOpts...)
			if err != nil {
				t.Fatalf("a %s after the %s was lost: %v", k.other, k.mode, err)
			}
			defer func() { _ = o.Release(ctx) }()
			if o.Fence() <= h.Fence() {
				t.Fatalf("fence %d after the lost %s's %d", o.Fence(), k.mode, h.Fence())
			}
			holdsOnly(t, c, name, k.other, o.Fence())
			if err := h.Extend(ctx, time.Minute); !errors.Is(err, core.ErrNotHeld) {
				t.Fatalf("Extend of the lost %s: %v, want ErrNotHeld", k.mode, err)
			}
		})
	}
}

// A kind granted in the window between the DEL and the lost hold's next renewal (the name was
// free: that is the loss) keeps the name: the lost hold's renewal neither renews nor revives its
// family's mark, so that kind stays the only holder and the lost hold's kind stays out.
func TestOneLock_markLoss_otherKindKeepsTheName(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	for _, k := range marklossKinds {
		t.Run(k.mode, func(t *testing.T) {
			name := "markloss-other/" + k.mode
			h, err := c.Acquire(ctx, name, marklossTTL, k.opts...)
			if err != nil {
				t.Fatal(err)
			}
			del := time.Now()
			if err := rdb.Del(ctx, markKey(name)).Err(); err != nil {
				t.Fatal(err)
			}
			o, err := c.TryAcquire(ctx, name, time.Minute, k.otherOpts...)
			if err != nil {
				t.Fatalf("a %s on the name whose lock key was deleted: %v", k.other, err)
			}
			defer func() { _ = o.Release(ctx) }()
			waitLost(t, k.mode, h, del)
			time.Sleep(2 * marklossTTL / 3) // two more of the lost hold's renewal intervals
			holdsOnly(t, c, name, k.other, o.Fence())
			if l, err := c.TryAcquire(ctx, name, time.Minute, k.opts...); !errors.Is(err, core.ErrNotAcquired) {
				if err == nil {
					_ = l.Release(ctx)
				}
				t.Fatalf("a %s beside the %s: %v, want ErrNotAcquired", k.mode, k.other, err)
			}
		})
	}
}

// Permits and reads granted by a fresh mark of their own family after the DEL do not revive the
// holds of the mark that was lost: those are lost all the same.
func TestOneLock_markLoss_sameFamilyDoesNotRevive(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	for _, k := range marklossKinds[:2] {
		t.Run(k.mode, func(t *testing.T) {
			name := "markloss-same/" + k.mode
			h, err := c.Acquire(ctx, name, marklossTTL, k.opts...)
			if err != nil {
				t.Fatal(err)
			}
			del := time.Now()
			if err := rdb.Del(ctx, markKey(name)).Err(); err != nil {
				t.Fatal(err)
			}
			n, err := c.TryAcquire(ctx, name, time.Minute, k.opts...)
			if err != nil {
				t.Fatalf("a %s on the name whose lock key was deleted: %v", k.mode, err)
			}
			defer func() { _ = n.Release(ctx) }()
			waitLost(t, k.mode, h, del)
			holdsOnly(t, c, name, k.mode, n.Fence())
		})
	}
}

// Extend of a hold whose mark was deleted (before any renewal heard of it) answers ErrNotHeld, and
// the hold is lost.
func TestOneLock_markLoss_extend(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	for _, k := range marklossKinds {
		t.Run(k.mode, func(t *testing.T) {
			name := "markloss-extend/" + k.mode
			h, err := c.Acquire(ctx, name, time.Minute, k.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := rdb.Del(ctx, markKey(name)).Err(); err != nil {
				t.Fatal(err)
			}
			if err := h.Extend(ctx, time.Minute); !errors.Is(err, core.ErrNotHeld) {
				t.Fatalf("Extend of a %s whose mark was deleted: %v, want ErrNotHeld", k.mode, err)
			}
			var le *core.LostError
			if !errors.As(context.Cause(h.Context()), &le) || le.Reason != "not_owner" {
				t.Fatalf("the %s's context after the refused Extend: %v, want a LostError not_owner", k.mode, context.Cause(h.Context()))
			}
		})
	}
}

// Release of a hold whose mark was deleted (before any renewal heard of it) answers ErrNotHeld and
// leaves the kind granted meanwhile as it was.
func TestOneLock_markLoss_release(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	for _, k := range marklossKinds {
		t.Run(k.mode, func(t *testing.T) {
			name := "markloss-release/" + k.mode
			h, err := c.Acquire(ctx, name, time.Minute, k.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := rdb.Del(ctx, markKey(name)).Err(); err != nil {
				t.Fatal(err)
			}
			o, err := c.TryAcquire(ctx, name, time.Minute, k.otherOpts...)
			if err != nil {
				t.Fatalf("a %s on the name whose lock key was deleted: %v", k.other, err)
			}
			defer func() { _ = o.Release(ctx) }()
			if err := h.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
				t.Fatalf("Release of a %s whose mark was deleted: %v, want ErrNotHeld", k.mode, err)
			}
			holdsOnly(t, c, name, k.other, o.Fence())
		})
	}
}
