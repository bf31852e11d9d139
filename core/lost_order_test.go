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

// A loss is reported (the Lost hook, the "lock lost" log) before the hold is given back in Redis:
// whoever observes the loss sees it before this Client lets anybody else have the name. The
// checker's latency scenario (issue 44) took the Lost hook's time as the holder's cancellation;
// the hook ran after the give-back of a hold declared expired was under way, so on a loaded host
// the other client was granted the name 169 µs before the hook ran and the checker reported an
// overlap that did not happen (the context had been cancelled before the give-back was sent).
//
// Here the holder's renewals stall before they reach Redis, and the test lengthens the key as a
// renewal that ran but answered too late would: the key leaves Redis only when the holder gives
// it back. The Lost hook waits for the other client to be granted the name, as a hook starved of
// CPU would be overtaken by it: it must not be.
func TestLost_reportedBeforeTheGiveBack(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	stall := &stalledRenewals{seen: make(chan struct{})}
	rdb.AddHook(stall)
	watch := srv.Client(t)
	granted := make(chan time.Time, 1)
	isGranted := func() bool { return len(granted) > 0 }
	const wait = 2 * time.Second // how long the Lost hook waits to be overtaken
	var (
		mu                         sync.Mutex
		lost                       int
		cancelledInHook, overtaken bool
		began, hookDone            time.Time
		logged, grantedBeforeLog   bool
	)
	hook := core.Hook{Lost: func(lctx context.Context, _ core.HoldInfo) {
		start, cancelled := time.Now(), lctx.Err() != nil
		timer := time.NewTimer(wait)
		defer timer.Stop()
		var was bool
		select {
		case <-timer.C:
		case at := <-granted:
			granted <- at
			was = true
		}
		mu.Lock()
		defer mu.Unlock()
		lost++
		cancelledInHook, overtaken, began, hookDone = cancelled, was, start, time.Now()
	}}
	logger := slog.New(&funcHandler{handle: func(r slog.Record) {
		if strings.Contains(r.Message, "lock lost") {
			mu.Lock()
			logged, grantedBeforeLog = true, isGranted()
			mu.Unlock()
		}
	}})
	holder := locktest.NewClient(t, rdb, core.WithHook(hook), core.WithLogger(logger))
	other := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	const ttl = 600 * time.Millisecond
	l, err := holder.Acquire(ctx, "lo", ttl)
	if err != nil {
		t.Fatal(err)
	}
	stall.on.Store(true)
	go func() {
		m, err := other.Acquire(ctx, "lo", ttl, core.WithWait(time.Minute))
		if err != nil {
			t.Errorf("other acquire: %v", err)
			return
		}
		granted <- time.Now()
		_ = m.Release(ctx)
	}()
	select {
	case <-stall.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal within 10 s")
	}
	// A renewal that ran in Redis (its reply will come too late): the key stays for a minute, so
	// only the holder's give-back can let the other client in.
	if ok, err := watch.PExpire(ctx, l.Key(), time.Minute).Result(); err != nil || !ok {
		t.Fatalf("PEXPIRE: %v, %v", ok, err)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the hold was not declared lost")
	}
	var le *core.LostError
	if !errors.As(context.Cause(l.Context()), &le) || le.Reason != "expired" {
		t.Fatalf("cause %v, want a loss (expired)", context.Cause(l.Context()))
	}
	var at time.Time
	select {
	case at = <-granted:
	case <-time.After(wait + 10*time.Second):
		t.Fatal("the other client was never granted the name: the hold was not given back")
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case lost != 1 || !logged:
		t.Fatalf("Lost ran %d times, logged %v; want once, and a log", lost, logged)
	case !cancelledInHook:
		t.Error("the Lost hook ran with the hold's context live")
	case overtaken:
		t.Errorf("the other client was granted the name while the holder's Lost hook ran (%v after it began): the give-back did not wait for the loss to be reported",
			at.Sub(began).Round(time.Microsecond))
	case grantedBeforeLog:
		t.Error(`the other client was granted the name before the holder logged "lock lost"`)
	case at.Before(hookDone):
		t.Errorf("the other client was granted the name %v before the holder's Lost hook returned", hookDone.Sub(at))
	}
}

// stalledRenewals, once on, holds each pipeline (the watchdog's renewals) back before it is sent,
// until its context ends; seen is closed at the first.
type stalledRenewals struct {
	on   atomic.Bool
	once sync.Once
	seen chan struct{}
}

func (h *stalledRenewals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stalledRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *stalledRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !h.on.Load() {
			return next(ctx, cmds)
		}
		h.once.Do(func() { close(h.seen) })
		<-ctx.Done()
		return ctx.Err()
	}
}

// funcHandler is a slog.Handler that passes each record to handle.
type funcHandler struct{ handle func(slog.Record) }

func (h *funcHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *funcHandler) Handle(_ context.Context, r slog.Record) error {
	h.handle(r)
	return nil
}

func (h *funcHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *funcHandler) WithGroup(string) slog.Handler { return h }
