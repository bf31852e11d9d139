package otel_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/otel/lockotel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestHook_acquire_work_release(t *testing.T) {
	e := setup(t)
	ctx, req := e.tracer.Start(context.Background(), "request")
	called := time.Now()
	l, err := e.c.Acquire(ctx, "orders", time.Second)
	acquire := time.Since(called) // (bounds the wait the metric records)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.sum(t, "lockkit.lock.held", set()); got != 1 {
		t.Errorf("held while holding = %d, want 1", got)
	}
	wctx, work := e.tracer.Start(l.Context(), "work")
	e.rdb.Get(wctx, "work-key")
	time.Sleep(5 * time.Millisecond) // work that takes time, to see in the hold duration
	work.End()
	e.rdb.Incr(l.Context(), "counter")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	whole := time.Since(called) // (bounds the hold the metric records)
	req.End()

	if got := names(e.sr.Ended()); len(got) != 4 {
		t.Fatalf("ended spans %v, want request, lock.wait, lock.hold, work", got)
	}
	request, wait, hold, w := e.only(t, "request"), e.only(t, "lock.wait"), e.only(t, "lock.hold"), e.only(t, "work")
	wantChild(t, wait, request)
	wantChild(t, hold, request) // a sibling of lock.wait, not its child
	wantChild(t, w, hold)
	if links := hold.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != wait.SpanContext().SpanID() {
		t.Errorf("lock.hold links %v, want one to lock.wait", links)
	}
	for _, s := range []string{"lock.wait", "lock.hold"} {
		sp := e.only(t, s)
		if sp.SpanKind() != trace.SpanKindInternal {
			t.Errorf("%s kind %v, want internal", s, sp.SpanKind())
		}
		if sp.Status().Code != codes.Unset {
			t.Errorf("%s status %v, want unset", s, sp.Status())
		}
		if sp.InstrumentationScope().Name != lockotel.ScopeName || sp.InstrumentationScope().Version != lockotel.Version {
			t.Errorf("%s scope %v", s, sp.InstrumentationScope())
		}
	}
	wantAttrs(t, "lock.wait", wait.Attributes(), map[string]string{"lockkit.lock.name": "orders",
		"lockkit.lock.outcome": "acquired", "lockkit.lock.attempts": "", "lockkit.lock.key": ""}) // 1 attempt: left out
	if ev := wait.Events(); len(ev) != 0 {
		t.Errorf("lock.wait events %v, want none for an attempt that acquires at once", ev)
	}
	wantAttrs(t, "lock.hold", hold.Attributes(), map[string]string{"lockkit.lock.name": "orders",
		"lockkit.lock.fence": strconv.FormatInt(l.Fence(), 10), "lockkit.lock.reentrant": "", "lockkit.lock.holds": "", // fresh: left out
		"lockkit.lock.ttl": "1", "lockkit.lock.hold.outcome": "released", "lockkit.lock.key": ""})
	if hold.StartTime().Before(wait.EndTime()) || hold.EndTime().Before(w.EndTime()) {
		t.Errorf("lock.hold %v..%v does not follow lock.wait (end %v) and cover the work (end %v)",
			hold.StartTime(), hold.EndTime(), wait.EndTime(), w.EndTime())
	}
	// The Redis commands nest where redisotel would put them.
	if got := e.cmds.under(wait.SpanContext().SpanID()); !slices.Contains(got, "evalsha") && !slices.Contains(got, "eval") {
		t.Errorf("commands under lock.wait %v, want the acquire script", got)
	}
	if got := e.cmds.under(w.SpanContext().SpanID()); !slices.Equal(got, []string{"get"}) {
		t.Errorf("commands under work %v, want [get]", got)
	}
	if got := e.cmds.under(hold.SpanContext().SpanID()); !slices.Equal(got, []string{"incr"}) {
		t.Errorf("commands under lock.hold %v, want [incr]", got)
	}
	e.noToken(t, l.Token())

	acquired := set("lockkit.lock.outcome", "acquired")
	if got := e.sum(t, "lockkit.lock.acquisitions", acquired); got != 1 {
		t.Errorf("acquisitions{acquired} = %d, want 1", got)
	}
	if got := e.sum(t, "lockkit.lock.held", set()); got != 0 {
		t.Errorf("held after release = %d, want 0", got)
	}
	// The metric is core's measure of the wait (WaitInfo.Duration), from the call to the answer; the
	// lock.wait span starts in the hook's WaitStart, after that call began: the metric can exceed the
	// span by the goroutine's delays between them (3.07 ms against a 1.95 ms span in a CI run), but
	// not the Acquire call.
	wd := e.hist(t, "lockkit.lock.wait.duration", acquired)
	if wd.Count != 1 || wd.Sum <= 0 || wd.Sum > acquire.Seconds() {
		t.Errorf("wait.duration{acquired} count %d sum %v, want 1 and (0, %v] (the Acquire call)", wd.Count, wd.Sum, acquire.Seconds())
	}
	if want := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}; !slices.Equal(wd.Bounds, want) {
		t.Errorf("bounds %v, want %v", wd.Bounds, want)
	}
	hd := e.hist(t, "lockkit.lock.hold.duration", set("lockkit.lock.hold.outcome", "released"))
	worked := w.EndTime().Sub(w.StartTime()).Seconds()
	// (The metric and the lock.hold span each take their own clock readings, neither inside the
	// other: the bound above is the calls'.)
	if hd.Count != 1 || hd.Sum < worked || hd.Sum > whole.Seconds() {
		t.Errorf("hold.duration{released} count %d sum %v, want 1 and in [%v, %v]", hd.Count, hd.Sum, worked, whole.Seconds())
	}
	if m := e.metrics(t); m["lockkit.lock.lost"].Data != nil || m["lockkit.lock.renewals"].Data != nil {
		t.Errorf("lost or renewals recorded: %v %v", m["lockkit.lock.lost"], m["lockkit.lock.renewals"])
	}
}

func TestHook_contention(t *testing.T) {
	e := setup(t)
	waiter := e.client(t, core.WithRetryBackoff(time.Minute, time.Minute)) // woken by the release only
	holder, err := e.c.Acquire(context.Background(), "jobs", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, req := e.tracer.Start(context.Background(), "waiter")
	type result struct {
		l   *core.Lock
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		l, err := waiter.Acquire(ctx, "jobs", 5*time.Second)
		done <- result{l, err}
	}()
	// The waiter tries, subscribes, tries again, then sleeps until woken.
	locktest.Eventually(t, 5*time.Second, "two failed attempts", func() bool {
		for _, s := range e.sr.Started() {
			if s.Name() == "lock.wait" && s.Parent().SpanID() == req.SpanContext().SpanID() {
				return len(s.Events()) >= 2
			}
		}
		return false
	})
	releasing := time.Now()
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	req.End()

	var wait, hold = e.spans("lock.wait"), e.spans("lock.hold")
	if len(wait) != 2 || len(hold) != 2 {
		t.Fatalf("spans %v, want two lock.wait and two lock.hold", names(e.sr.Ended()))
	}
	ww, wh := wait[1], hold[1] // the waiter's, ended last
	wantChild(t, ww, e.only(t, "waiter"))
	wantChild(t, wh, e.only(t, "waiter"))
	wantAttrs(t, "waiter's lock.wait", ww.Attributes(), map[string]string{"lockkit.lock.outcome": "acquired",
		"lockkit.lock.attempts": "3"})
	if ww.StartTime().Before(start) || ww.EndTime().Before(releasing) {
		t.Errorf("lock.wait %v..%v does not span from the call (%v) to the release (%v)", ww.StartTime(), ww.EndTime(), start, releasing)
	}
	ev := ww.Events()
	if len(ev) != 3 {
		t.Fatalf("lock.wait events %d, want 3", len(ev))
	}
	for i, want := range []map[string]string{
		{"lockkit.lock.attempt": "1", "lockkit.lock.woken": "false", "lockkit.lock.acquired": "false"},
		{"lockkit.lock.attempt": "2", "lockkit.lock.woken": "false", "lockkit.lock.acquired": "false"},
		{"lockkit.lock.attempt": "3", "lockkit.lock.woken": "true", "lockkit.lock.acquired": "true"},
	} {
		wantAttrs(t, ev[i].Name, ev[i].Attributes, want)
	}
	if ra := attrs(ev[0].Attributes)["lockkit.lock.retry_after"]; ra == "0" || ra == "" {
		t.Errorf("first attempt retry_after %q, want the holder's TTL", ra)
	}
	wantAttrs(t, "waiter's lock.hold", wh.Attributes(), map[string]string{"lockkit.lock.fence": strconv.FormatInt(r.l.Fence(), 10)})
	if r.l.Fence() <= holder.Fence() {
		t.Errorf("waiter's fence %d not above the holder's %d", r.l.Fence(), holder.Fence())
	}

	acquired := set("lockkit.lock.outcome", "acquired")
	if got := e.sum(t, "lockkit.lock.acquisitions", acquired); got != 2 {
		t.Errorf("acquisitions{acquired} = %d, want 2", got)
	}
	wd := e.hist(t, "lockkit.lock.wait.duration", acquired)
	if waited := ww.EndTime().Sub(ww.StartTime()).Seconds(); wd.Count != 2 || wd.Sum < waited*0.99 {
		t.Errorf("wait.duration{acquired} count %d sum %v, want 2 and >= the waiter's %v", wd.Count, wd.Sum, waited)
	}
}

// Outcomes other than "error" are not span errors.
func TestHook_outcomes(t *testing.T) {
	e := setup(t)
	holder, err := e.c.Acquire(context.Background(), "busy", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(context.Background())
	if err := e.rdb.Set(context.Background(), "{done}:result", "42", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	dead := deadClient(t, e)
	for _, tc := range []struct {
		outcome string
		acquire func() error
		status  codes.Code
	}{
		{"contended", func() error { _, err := e.c.TryAcquire(context.Background(), "busy", time.Second); return err }, codes.Unset},
		{"timeout", func() error {
			_, err := e.c.Acquire(context.Background(), "busy", time.Second, core.WithWait(30*time.Millisecond))
			return err
		}, codes.Unset},
		{"cancelled", func() error { _, err := e.c.Acquire(cancelled, "busy", time.Second); return err }, codes.Unset},
		{"guarded", func() error {
			_, err := e.c.Acquire(context.Background(), "done", time.Second, core.WithGuard("{done}:result"))
			return err
		}, codes.Unset},
		{"error", func() error { _, err := dead.TryAcquire(context.Background(), "any", time.Second); return err }, codes.Error},
	} {
		e.sr.Reset()
		if err := tc.acquire(); err == nil {
			t.Fatalf("%s: acquired", tc.outcome)
		}
		w := e.only(t, "lock.wait")
		wantAttrs(t, tc.outcome, w.Attributes(), map[string]string{"lockkit.lock.outcome": tc.outcome})
		if w.Status().Code != tc.status {
			t.Errorf("%s: status %v, want %v", tc.outcome, w.Status(), tc.status)
		}
		if len(e.spans("lock.hold")) != 0 {
			t.Errorf("%s: a lock.hold span", tc.outcome)
		}
		if got := e.sum(t, "lockkit.lock.acquisitions", set("lockkit.lock.outcome", tc.outcome)); got != 1 {
			t.Errorf("acquisitions{%s} = %d, want 1", tc.outcome, got)
		}
		if got := e.hist(t, "lockkit.lock.wait.duration", set("lockkit.lock.outcome", tc.outcome)); got.Count != 1 {
			t.Errorf("wait.duration{%s} count %d, want 1", tc.outcome, got.Count)
		}
	}
	e.sr.Reset()
	_, _ = dead.TryAcquire(context.Background(), "any", time.Second)
	wantAttrs(t, "error", e.only(t, "lock.wait").Attributes(), map[string]string{"error.type": "unavailable"})
	if got := e.sum(t, "lockkit.lock.held", set()); got != 1 {
		t.Errorf("held = %d, want 1", got)
	}
}

// deadClient returns a core client with e's hook over a Redis that is not there.
func deadClient(t *testing.T, e *env) *core.Client {
	o := e.srv.Options()
	o.Addr = "127.0.0.1:1"
	o.MaxRetries, o.DialerRetries, o.DialerRetryTimeout = -1, 1, time.Millisecond
	rdb := redisClient(t, o)
	c, err := core.New(rdb, core.WithHook(e.hook))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func TestHook_reentrant(t *testing.T) {
	e := setup(t)
	c := e.client(t, core.WithRenewRatio(0.05)) // renewals every 50ms
	ctx, req := e.tracer.Start(context.Background(), "request")
	outer, err := c.Acquire(ctx, "r", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Acquire(outer.Context(), "r", time.Second)
	if err != nil || inner.Holds() == 1 {
		t.Fatal(inner, err)
	}
	other, err := c.Acquire(inner.Context(), "other", time.Minute) // a different lock, nested
	if err != nil {
		t.Fatal(err)
	}
	if got := e.sum(t, "lockkit.lock.held", set()); got != 2 {
		t.Errorf("held = %d, want 2 (r once, other once)", got)
	}
	locktest.Eventually(t, 5*time.Second, "two renewals", func() bool { return len(renewsOf(e, "r")) >= 2 })
	for i, l := range []*core.Lock{other, inner, outer} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if want := []int64{1, 1, 0}[i]; e.sum(t, "lockkit.lock.held", set()) != want {
			t.Errorf("held after %d releases = %d, want %d", i+1, e.sum(t, "lockkit.lock.held", set()), want)
		}
	}
	req.End()

	holds := e.spans("lock.hold") // ended: other, inner, outer
	if len(holds) != 3 {
		t.Fatalf("%d lock.hold spans, want 3", len(holds))
	}
	oh, ih, xh := holds[2], holds[1], holds[0]
	fence := strconv.FormatInt(outer.Fence(), 10) // re-entering keeps the fence
	wantChild(t, oh, e.only(t, "request"))
	wantChild(t, ih, oh)
	wantChild(t, xh, ih)
	wantAttrs(t, "outer", oh.Attributes(), map[string]string{"lockkit.lock.reentrant": "", "lockkit.lock.holds": "", "lockkit.lock.fence": fence})
	wantAttrs(t, "inner", ih.Attributes(), map[string]string{"lockkit.lock.reentrant": "true", "lockkit.lock.holds": "2", "lockkit.lock.fence": fence})
	waits := e.spans("lock.wait")
	if len(waits) != 3 {
		t.Fatalf("%d lock.wait spans, want 3", len(waits))
	}
	wantChild(t, waits[1], oh)
	if l := ih.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != waits[1].SpanContext().SpanID() {
		t.Errorf("inner hold links %v, want its wait", l)
	}
	// The lock is renewed once for both holds: one renew span each time, under the outer hold.
	for _, r := range renewsOf(e, "r") {
		wantChild(t, r, oh)
	}
	locktest.Eventually(t, time.Second, "renewals counted as spans", func() bool {
		return e.sum(t, "lockkit.lock.renewals", set("lockkit.lock.renew.outcome", "renewed")) == int64(len(e.spans("lock.renew")))
	})
	if got := e.sum(t, "lockkit.lock.held", set()); got != 0 {
		t.Errorf("held after release = %d, want 0", got)
	}
	if got := e.sum(t, "lockkit.lock.acquisitions", set("lockkit.lock.outcome", "acquired")); got != 3 {
		t.Errorf("acquisitions = %d, want 3", got)
	}
	if got := e.hist(t, "lockkit.lock.hold.duration", set("lockkit.lock.hold.outcome", "released")); got.Count != 3 {
		t.Errorf("hold.duration count %d, want 3", got.Count)
	}
}

// Two hooks on one client (say, two providers) keep their state apart.
func TestHook_two_hooks(t *testing.T) {
	a, b := setup(t), setup(t)
	c := a.client(t, core.WithHook(b.hook))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			ctx, req := a.tracer.Start(context.Background(), "request")
			defer req.End()
			if err := c.Do(ctx, "shared", time.Second, func(context.Context) error { return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// b's hook wrapped the context a's WaitStart returned; a's hold is still a child of the
	// request, with a's wait.
	for _, req := range a.spans("request") {
		var n int
		for _, s := range a.sr.Ended() {
			if s.Parent().SpanID() == req.SpanContext().SpanID() {
				n++
			}
		}
		if n != 2 {
			t.Errorf("request has %d children in a, want lock.wait and lock.hold", n)
		}
	}
	for _, e := range []*env{a, b} {
		if w, h := len(e.spans("lock.wait")), len(e.spans("lock.hold")); w != 4 || h != 4 {
			t.Errorf("%d waits, %d holds, want 4 each", w, h)
		}
		for _, s := range e.spans("lock.hold") {
			if s.InstrumentationScope().Name != lockotel.ScopeName {
				t.Error(s.InstrumentationScope())
			}
		}
		if got := e.sum(t, "lockkit.lock.held", set()); got != 0 {
			t.Errorf("held = %d, want 0", got)
		}
	}
}

// Close releases held locks: their hold spans end as released.
func TestHook_close(t *testing.T) {
	e := setup(t)
	c := e.client(t)
	if _, err := c.Acquire(context.Background(), "closing", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantAttrs(t, "lock.hold", e.only(t, "lock.hold").Attributes(), map[string]string{"lockkit.lock.hold.outcome": "released"})
	if got := e.sum(t, "lockkit.lock.held", set()); got != 0 {
		t.Errorf("held = %d, want 0", got)
	}
	if _, err := c.Acquire(context.Background(), "closing", time.Second); !errors.Is(err, core.ErrClosed) {
		t.Fatal(err)
	}
}

// renewsOf returns the lock.renew spans of the named lock.
func renewsOf(e *env, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, r := range e.spans("lock.renew") {
		if attrs(r.Attributes())["lockkit.lock.name"] == name {
			out = append(out, r)
		}
	}
	return out
}
