package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// Through a write hold's context, Read and Write nest in it; through a read hold's, Read nests and
// Write (upgrade) is refused with ErrInvalid. A nested hold sends nothing to Redis, keeps the
// outer fence and token, and reports Holds() > 1.
func TestRW_reentry_nestedAndUpgradeRefused(t *testing.T) {
	srv, _, c := setup(t)
	ctx := context.Background()
	for _, outer := range []struct {
		mode string
		opt  core.AcquireOption
	}{{"write", core.Write()}, {"read", core.Read()}} {
		o, err := c.Acquire(ctx, "doc", 5*time.Second, outer.opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, inner := range []struct {
			mode string
			opt  core.AcquireOption
		}{{"read", core.Read()}, {"write", core.Write()}} {
			in, err := c.TryAcquire(o.Context(), "doc", time.Second, inner.opt)
			if outer.mode == "read" && inner.mode == "write" {
				if !errors.Is(err, core.ErrInvalid) {
					t.Fatalf("write under read (upgrade): %v, want ErrInvalid", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s under %s: %v", inner.mode, outer.mode, err)
			}
			srv.ResetStats(t)
			if in.Fence() != o.Fence() || in.Token() != o.Token() || in.Holds() == 1 || in.Holds() != 2 || in.Mode() != inner.mode {
				t.Fatalf("%s under %s: fence %d (outer %d) reentrant %v holds %d mode %q", inner.mode, outer.mode,
					in.Fence(), o.Fence(), in.Holds() > 1, in.Holds(), in.Mode())
			}
			// Nested twice: still the outer acquisition.
			in2, err := c.TryAcquire(in.Context(), "doc", time.Second, core.Read())
			if err != nil || in2.Fence() != o.Fence() || in2.Holds() != 3 {
				t.Fatalf("nested in a nested hold: %v", err)
			}
			if err := in2.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := in.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if st := srv.CommandStats(t); st["evalsha"]+st["eval"]+st["evalsha_ro"]+st["eval_ro"] != 0 {
				t.Fatalf("%s under %s: nested holds ran scripts %v", inner.mode, outer.mode, st)
			}
			if d, err := o.TTL(ctx); err != nil || d <= 4*time.Second {
				t.Fatalf("outer after the nested releases: TTL %v %v", d, err)
			}
		}
		if err := o.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A read-write hold is found through the locks taken inside it: a Write through the context of a
// lock taken under a read hold of the same name is still an upgrade (refused, instead of waiting
// for itself), and a Read there nests.
func TestRW_reentry_throughOtherLocks(t *testing.T) {
	srv, _, c := setup(t)
	ctx := context.Background()
	r, err := c.Acquire(ctx, "doc", 5*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	other, err := c.Acquire(r.Context(), "other", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	wctx, cancel := context.WithTimeout(other.Context(), 2*time.Second)
	defer cancel()
	if _, err := c.Acquire(wctx, "doc", time.Second, core.Write()); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("write under a lock under a read: %v, want ErrInvalid", err)
	}
	in, err := c.TryAcquire(other.Context(), "doc", time.Second, core.Read())
	if err != nil || in.Holds() == 1 || in.Fence() != r.Fence() {
		t.Fatalf("read under a lock under a read: %v", err)
	}
	_ = in.Release(ctx)
	// Another Client's hold is another owner's: no nesting, and a writer waits.
	c2 := locktest.NewClient(t, srv.Client(t))
	if _, err := c2.TryAcquire(r.Context(), "doc", time.Second, core.Write()); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("another Client's write through the read hold's context: %v, want ErrNotAcquired", err)
	}
}

// The outer hold's end ends its nested holds first, with the same cause: a release (their
// contexts end with ErrReleased, their Release returns nil and sends nothing) and a loss (their
// contexts end with the *LostError, the hook hears Lost for each, innermost first).
func TestRW_reentry_nestedEndsWithOuter(t *testing.T) {
	var mu sync.Mutex
	var ends []string
	hook := core.Hook{
		Released: func(_ context.Context, h core.HoldInfo) {
			mu.Lock()
			ends = append(ends, "released:"+h.Lock.Mode())
			mu.Unlock()
		},
		Lost: func(_ context.Context, h core.HoldInfo) {
			mu.Lock()
			ends = append(ends, "lost:"+h.Lock.Mode())
			mu.Unlock()
		},
	}
	srv, _, _ := setup(t)
	cut := &failRenewals{}
	rdb := srv.Client(t)
	rdb.AddHook(cut)
	c := locktest.NewClient(t, rdb, core.WithHook(hook))
	ctx := context.Background()
	w, err := c.Acquire(ctx, "doc", 5*time.Second, core.Write())
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Acquire(w.Context(), "doc", 5*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(in.Context()); !errors.Is(cause, core.ErrReleased) {
		t.Fatalf("nested hold's cause after the outer release: %v", cause)
	}
	if err := in.Release(ctx); err != nil {
		t.Fatalf("nested release after the outer's: %v", err)
	}
	if _, err := c.TryAcquire(w.Context(), "doc", time.Second, core.Read()); !errors.Is(err, core.ErrNotAcquired) && !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("nesting in a released hold: %v, want an error", err)
	}
	mu.Lock()
	if len(ends) != 2 || ends[0] != "released:read" || ends[1] != "released:write" {
		t.Fatalf("end events %v, want the nested hold's first", ends)
	}
	ends = nil
	mu.Unlock()

	// A loss: renewals fail until the validity deadline.
	w, err = c.Acquire(ctx, "doc", 300*time.Millisecond, core.Write())
	if err != nil {
		t.Fatal(err)
	}
	in, err = c.Acquire(w.Context(), "doc", 5*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	cut.on.Store(true)
	<-in.Context().Done()
	var le *core.LostError
	if cause := context.Cause(in.Context()); !errors.As(cause, &le) || le.Reason != "expired" {
		t.Fatalf("nested hold's cause after the loss: %v", cause)
	}
	<-w.Context().Done()
	cut.on.Store(false)
	if err := in.Release(ctx); !errors.Is(err, core.ErrLost) {
		t.Fatalf("nested release after the loss: %v, want ErrLost", err)
	}
	locktest.Eventually(t, 2*time.Second, "both losses reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ends) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if ends[0] != "lost:read" || ends[1] != "lost:write" {
		t.Fatalf("end events %v", ends)
	}
}

// A nested hold's WithMaxHold ends it alone; the outer hold and its lease stay. An outer limit
// bounds the nested hold too.
func TestRW_reentry_maxHold(t *testing.T) {
	renewed := make(chan struct{}, 1)
	_, rdb, c := setup(t, core.WithHook(core.Hook{Renewed: func(context.Context, core.HoldInfo) {
		select {
		case renewed <- struct{}{}:
		default:
		}
	}}))
	ctx := context.Background()
	r, err := c.Acquire(ctx, "doc", 6*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	<-renewed // (the outer hold's first renewal: its next one is 2 s away)
	in, err := c.Acquire(r.Context(), "doc", 5*time.Second, core.Read(), core.WithMaxHold(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// The nested limit ends it on time, not at the outer hold's next renewal (the scheduler once
	// slept through a nested deadline until then).
	select {
	case <-in.Context().Done():
	case <-time.After(time.Second):
		t.Fatal("the nested hold outlived its 100 ms limit by 900 ms")
	}
	if cause := context.Cause(in.Context()); !errors.Is(cause, core.ErrMaxHold) {
		t.Fatalf("nested cause %v", cause)
	}
	if r.Context().Err() != nil {
		t.Fatalf("outer ended with the nested hold's limit: %v", context.Cause(r.Context()))
	}
	// The outer read is still held in Redis (its lease is the watchdog's business, anywhere up to
	// 5 s), and a writer cannot get in.
	if d, err := r.TTL(ctx); err != nil || d <= 0 {
		t.Fatalf("outer lease after the nested limit: %v %v", d, err)
	}
	if l, err := locktest.NewClient(t, rdb).TryAcquire(ctx, "doc", time.Second, core.Write()); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a writer got in beside the outer read: %v %v", l, err)
	}
	_ = r.Release(ctx)
	w, err := c.Acquire(ctx, "doc", 5*time.Second, core.Write(), core.WithMaxHold(150*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	in, err = c.Acquire(w.Context(), "doc", 5*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	<-in.Context().Done()
	<-w.Context().Done()
	if !errors.Is(context.Cause(in.Context()), core.ErrMaxHold) || !errors.Is(context.Cause(w.Context()), core.ErrMaxHold) {
		t.Fatalf("causes %v, %v", context.Cause(in.Context()), context.Cause(w.Context()))
	}
	locktest.Eventually(t, 2*time.Second, "the write given back", func() bool {
		l, err := c.TryAcquire(ctx, "doc", time.Second, core.Write())
		return err == nil && l.Release(ctx) == nil
	})
}
