package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/otel/lockotel"
)

func TestHook_renewals(t *testing.T) {
	e := setup(t)
	c := e.client(t, core.WithRenewRatio(0.05)) // renewals every 50ms, with time to spare
	l, err := c.Acquire(context.Background(), "long", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "three renewals", func() bool { return len(e.spans("lock.renew")) >= 3 })
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	hold := e.only(t, "lock.hold")
	renews := e.spans("lock.renew")
	last := hold.StartTime()
	for _, r := range renews {
		wantChild(t, r, hold)
		wantAttrs(t, "lock.renew", r.Attributes(), map[string]string{"lockkit.lock.name": "long",
			"lockkit.lock.renew.outcome": "renewed", "lockkit.lock.ttl": "1"})
		if r.Status().Code != codes.Unset || r.StartTime().Before(last) || r.EndTime().Before(r.StartTime()) {
			t.Errorf("lock.renew %v..%v status %v, after %v", r.StartTime(), r.EndTime(), r.Status(), last)
		}
		last = r.StartTime()
	}
	locktest.Eventually(t, time.Second, "renewals counted as spans", func() bool {
		return e.sum(t, "lockkit.lock.renewals", set("lockkit.lock.renew.outcome", "renewed")) == int64(len(e.spans("lock.renew")))
	})
	e.noToken(t, l.Token())
}

func TestHook_renewal_events(t *testing.T) {
	e := setup(t, lockotel.WithRenewalEvents())
	c := e.client(t, core.WithRenewRatio(0.05))
	l, err := c.Acquire(context.Background(), "long", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "two renewals", func() bool {
		return e.sum(t, "lockkit.lock.renewals", set("lockkit.lock.renew.outcome", "renewed")) >= 2
	})
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.spans("lock.renew")); n != 0 {
		t.Errorf("%d lock.renew spans, want events instead", n)
	}
	hold := e.only(t, "lock.hold")
	ev := hold.Events()
	if len(ev) < 2 {
		t.Fatalf("%d events on lock.hold, want >= 2", len(ev))
	}
	for _, x := range ev {
		if x.Name != "lock.renew" || x.Time.Before(hold.StartTime()) || x.Time.After(hold.EndTime()) {
			t.Errorf("event %s at %v, hold %v..%v", x.Name, x.Time, hold.StartTime(), hold.EndTime())
		}
		wantAttrs(t, "lock.renew event", x.Attributes, map[string]string{"lockkit.lock.renew.outcome": "renewed"})
		if _, ok := attrs(x.Attributes)["lockkit.lock.renew.latency"]; !ok {
			t.Errorf("no latency on %v", x.Attributes)
		}
	}
}

// The lock key is deleted behind the holder's back: the next renewal finds it gone.
func TestHook_lost(t *testing.T) {
	e := setup(t)
	l, err := e.c.Acquire(context.Background(), "fragile", 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Del(context.Background(), l.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lock not lost")
	}
	// The context is cancelled before the hook runs (cancel, state, hook): wait for the span.
	e.await(t, "lock.hold", 1)
	hold := e.only(t, "lock.hold")
	if hold.Status().Code != codes.Error {
		t.Errorf("lock.hold status %v, want error", hold.Status())
	}
	wantAttrs(t, "lock.hold", hold.Attributes(), map[string]string{"lockkit.lock.hold.outcome": "lost",
		"lockkit.lock.lost.reason": "not_owner", "error.type": "lost"})
	// The renewal that found the lock gone ends before the hold, in error.
	renews := e.spans("lock.renew")
	if len(renews) == 0 {
		t.Fatal("no lock.renew span")
	}
	last := renews[len(renews)-1]
	wantChild(t, last, hold)
	wantAttrs(t, "last lock.renew", last.Attributes(), map[string]string{"lockkit.lock.renew.outcome": "not_owner"})
	if last.Status().Code != codes.Error || last.EndTime().After(hold.EndTime()) {
		t.Errorf("last lock.renew status %v, ends %v (hold ends %v)", last.Status(), last.EndTime(), hold.EndTime())
	}
	if got := e.sum(t, "lockkit.lock.renewals", set("lockkit.lock.renew.outcome", "not_owner")); got != 1 {
		t.Errorf("renewals{not_owner} = %d, want 1", got)
	}
	check := func() {
		t.Helper()
		if got := e.sum(t, "lockkit.lock.lost", set("lockkit.lock.lost.reason", "not_owner")); got != 1 {
			t.Errorf("lost{not_owner} = %d, want 1", got)
		}
		if got := e.sum(t, "lockkit.lock.held", set()); got != 0 {
			t.Errorf("held = %d, want 0", got)
		}
		if got := e.hist(t, "lockkit.lock.hold.duration", set("lockkit.lock.hold.outcome", "lost")); got.Count != 1 {
			t.Errorf("hold.duration{lost} count %d, want 1", got.Count)
		}
	}
	check()
	// Releasing the lost lock changes nothing more.
	spans := len(e.sr.Ended())
	if err := l.Release(context.Background()); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("release: %v", err)
	}
	check()
	if n := len(e.sr.Ended()); n != spans {
		t.Errorf("%d spans after the release, want %d", n, spans)
	}
}

// Redis stops answering: renewals fail until the validity deadline passes.
func TestHook_lost_expired(t *testing.T) {
	e := setup(t)
	l, err := e.c.Acquire(context.Background(), "stalled", 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Pause(t)
	defer e.srv.Resume(t)
	select {
	case <-l.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lock not lost")
	}
	e.await(t, "lock.hold", 1) // (the hook runs after the context is cancelled)
	wantAttrs(t, "lock.hold", e.only(t, "lock.hold").Attributes(), map[string]string{
		"lockkit.lock.hold.outcome": "lost", "lockkit.lock.lost.reason": "expired"})
	if got := e.sum(t, "lockkit.lock.lost", set("lockkit.lock.lost.reason", "expired")); got != 1 {
		t.Errorf("lost{expired} = %d, want 1", got)
	}
}

// The watchdog misses the loss (the key is gone before the first renewal): Release finds it.
func TestHook_lost_found_at_release(t *testing.T) {
	e := setup(t)
	l, err := e.c.Acquire(context.Background(), "gone", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Del(context.Background(), l.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("release: %v", err)
	}
	hold := e.only(t, "lock.hold")
	if hold.Status().Code != codes.Error {
		t.Errorf("lock.hold status %v, want error", hold.Status())
	}
	wantAttrs(t, "lock.hold", hold.Attributes(), map[string]string{"lockkit.lock.hold.outcome": "lost",
		"lockkit.lock.lost.reason": "not_owner"})
	if got := e.sum(t, "lockkit.lock.lost", set("lockkit.lock.lost.reason", "not_owner")); got != 1 {
		t.Errorf("lost{not_owner} = %d, want 1", got)
	}
	if got := e.sum(t, "lockkit.lock.held", set()); got != 0 {
		t.Errorf("held = %d, want 0", got)
	}
}

// A lock lost under two holds of one owner counts once.
func TestHook_lost_reentrant(t *testing.T) {
	e := setup(t)
	outer, err := e.c.Acquire(context.Background(), "twice", 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Acquire(outer.Context(), "twice", 150*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Del(context.Background(), outer.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	// The outer hold's context is cancelled first, and the inner's with it: wait for both spans.
	locktest.Eventually(t, 5*time.Second, "both holds lost", func() bool { return len(e.spans("lock.hold")) == 2 })
	holds := e.spans("lock.hold")
	for _, h := range holds {
		if h.Status().Code != codes.Error {
			t.Errorf("lock.hold status %v, want error", h.Status())
		}
	}
	if got := e.sum(t, "lockkit.lock.lost", set("lockkit.lock.lost.reason", "not_owner")); got != 1 {
		t.Errorf("lost = %d, want 1", got)
	}
	if got := e.sum(t, "lockkit.lock.held", set()); got != 0 {
		t.Errorf("held = %d, want 0", got)
	}
}
