package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// hookLog records what a Hook is told about holds: what instrumentation needs without keeping state
// of its own (issue #19).
type hookLog struct {
	mu       sync.Mutex
	held     int                // running sum of HoldInfo.Held
	ends     map[*core.Lock]int // end events (Lost or Released) per hold
	lasts    int                // Last flags seen
	renewals map[*core.Lock]int
}

func newHookLog() *hookLog {
	return &hookLog{ends: map[*core.Lock]int{}, renewals: map[*core.Lock]int{}}
}

func (g *hookLog) hook() core.Hook {
	end := func(_ context.Context, h core.HoldInfo) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.held += h.Held
		g.ends[h.Lock]++
		if h.Last {
			g.lasts++
		}
	}
	return core.Hook{
		Acquired: func(ctx context.Context, h core.HoldInfo) context.Context {
			g.mu.Lock()
			g.held += h.Held
			g.mu.Unlock()
			return ctx
		},
		Renewed: func(_ context.Context, h core.HoldInfo) {
			g.mu.Lock()
			g.renewals[h.Lock]++
			g.mu.Unlock()
		},
		Lost:     end,
		Released: end,
	}
}

func (g *hookLog) state() (held, lasts int, ends map[*core.Lock]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held, g.lasts, g.ends
}

// Held counts the locks a Client holds: +1 when it starts holding one, -1 when its last hold of it
// ends, whatever the order of releases, re-entries through the context or WithOwner, and losses.
func TestHook_heldAndLast_neverDrift(t *testing.T) {
	g := newHookLog()
	srv, rdb, c := setup(t, core.WithHook(g.hook()))
	other := locktest.NewClient(t, srv.Client(t), core.WithHook(g.hook()))
	ctx := context.Background()
	check := func(when string, wantHeld, wantLasts int) {
		t.Helper()
		// A loss is reported by the watchdog's goroutine: its last event may follow the
		// cancellation of the first hold's context.
		locktest.Eventually(t, time.Second, when, func() bool {
			held, lasts, _ := g.state()
			return held == wantHeld && lasts == wantLasts
		})
	}
	outer, _ := c.Acquire(ctx, "a", time.Second)
	inner, _ := c.Acquire(outer.Context(), "a", time.Second)
	co, _ := other.Acquire(ctx, "a", time.Second, core.WithOwner(outer.Token()))
	check("a held by two clients", 2, 0)
	_ = outer.Release(ctx) // out of order: the inner hold keeps the lock held here
	check("outer released first", 2, 0)
	_ = inner.Release(ctx)
	check("last hold here released", 1, 1)
	_ = co.Release(ctx)
	check("all released", 0, 2)

	// A loss of a lock held twice here counts once.
	l1, _ := c.Acquire(ctx, "b", 200*time.Millisecond)
	l2, _ := c.Acquire(l1.Context(), "b", 200*time.Millisecond)
	rdb.Del(ctx, l1.Key())
	<-l2.Context().Done()
	<-l1.Context().Done()
	check("lost", 0, 3)

	// Release finding the lock gone loses the other hold here; the loss counts once.
	m1, _ := c.Acquire(ctx, "c", 10*time.Second)
	m2, _ := c.Acquire(m1.Context(), "c", 10*time.Second)
	rdb.Del(ctx, m1.Key())
	if err := m2.Release(ctx); err == nil {
		t.Fatal("release of a deleted lock succeeded")
	}
	<-m1.Context().Done()
	check("release found it gone", 0, 4)

	// Close ends what is held.
	_, _ = c.Acquire(ctx, "d", 10*time.Second)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	check("closed", 0, 5)
	_, _, ends := g.state()
	for l, n := range ends {
		if n != 1 {
			t.Errorf("hold %s (fence %d) ended %d times", l.Name(), l.Fence(), n)
		}
	}
	if len(ends) != 8 {
		t.Errorf("%d holds ended, want 8", len(ends))
	}
}

// Renewals of re-entered holds are reported once, for the outermost hold still open.
func TestHook_renewedOncePerLock(t *testing.T) {
	g := newHookLog()
	_, _, c := setup(t, core.WithHook(g.hook()))
	ctx := context.Background()
	// A TTL that a loaded host's scheduling delays cannot outrun (renewals every 100 ms): with 60 ms
	// the lock was sometimes lost between renewals, and the inner hold then had none to report.
	outer, err := c.Acquire(ctx, "a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Acquire(outer.Context(), "a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "three renewals", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.renewals[outer] >= 3
	})
	_ = outer.Release(ctx)
	g.mu.Lock()
	before := g.renewals[inner]
	g.mu.Unlock()
	if before != 0 {
		t.Fatalf("renewals reported on the inner hold too (%d) while the outer was open", before)
	}
	locktest.Eventually(t, 5*time.Second, "the inner hold reports renewals once the outer is released", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.renewals[inner] >= 1
	})
	_ = inner.Release(ctx)
}
