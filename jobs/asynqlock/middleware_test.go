package asynqlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/asynqlock"
	"github.com/redis/go-redis/v9"
)

// These tests call the middleware directly, outside an asynq server: the context carries no task ID,
// so every call takes the lock with a fresh owner token.

func setup(t testing.TB) (*redis.Client, *core.Client) {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	return rdb, newLocks(t, rdb)
}

func wrap(t *testing.T, c *core.Client, h asynq.HandlerFunc, opts ...asynqlock.Option) asynq.Handler {
	t.Helper()
	return newMiddleware(t, c, opts...)(h)
}

func TestMiddleware_invalidOptions(t *testing.T) {
	_, c := setup(t)
	for name, tc := range map[string]struct {
		c    *core.Client
		opts []asynqlock.Option
	}{
		"nil client":      {nil, nil},
		"nil key":         {c, []asynqlock.Option{asynqlock.WithKey(nil)}},
		"floor too small": {c, []asynqlock.Option{asynqlock.WithTTL(time.Millisecond, time.Second)}},
		"cap too large":   {c, []asynqlock.Option{asynqlock.WithTTL(time.Second, 25*time.Hour)}},
		"floor over cap":  {c, []asynqlock.Option{asynqlock.WithTTL(2*time.Second, time.Second)}},
		"negative wait":   {c, []asynqlock.Option{asynqlock.WithWait(-time.Second)}},
		"bad namespace":   {c, []asynqlock.Option{asynqlock.WithNamespace("Cron/")}},
	} {
		if mw, err := asynqlock.Middleware(tc.c, tc.opts...); !errors.Is(err, core.ErrInvalid) || mw != nil {
			t.Errorf("%s: err = %v, want core.ErrInvalid", name, err)
		}
	}
}

func TestMiddleware_noKey_passesThrough(t *testing.T) {
	_, c := setup(t)
	called := false
	h := wrap(t, c, func(ctx context.Context, _ *asynq.Task) error {
		called = true
		if _, ok := core.FromContext(ctx); ok {
			t.Error("a task without a key ran under a lock")
		}
		return nil
	}, asynqlock.WithKey(asynqlock.ByHeader("customer")))
	if err := h.ProcessTask(context.Background(), asynq.NewTask("work", nil)); err != nil || !called {
		t.Fatalf("err = %v, called = %v", err, called)
	}
}

func TestMiddleware_ttlFollowsDeadline(t *testing.T) {
	_, c := setup(t)
	for _, tc := range []struct {
		deadline time.Duration // 0: none
		min, max time.Duration
	}{
		{0, 4 * time.Second, 5 * time.Second},                                    // no deadline: the cap
		{time.Hour, 4 * time.Second, 5 * time.Second},                            // far: the cap
		{3 * time.Second, 2*time.Second + 500*time.Millisecond, 3 * time.Second}, // the time left
		{100 * time.Millisecond, time.Second, time.Second},                       // near: the floor
	} {
		ctx := context.Background()
		if tc.deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, tc.deadline)
			defer cancel()
		}
		var ttl time.Duration
		h := wrap(t, c, func(ctx context.Context, _ *asynq.Task) error {
			l, _ := core.FromContext(ctx)
			var err error
			ttl, err = l.TTL(ctx)
			return err
		}, asynqlock.WithTTL(time.Second, 5*time.Second))
		if err := h.ProcessTask(ctx, asynq.NewTask("ttl", nil)); err != nil {
			t.Fatal(err)
		}
		if ttl < tc.min-100*time.Millisecond || ttl > tc.max {
			t.Errorf("deadline in %v: lock TTL %v, want %v..%v", tc.deadline, ttl, tc.min, tc.max)
		}
	}
}

func TestMiddleware_busy_tryOnce(t *testing.T) {
	_, c := setup(t)
	ctx := context.Background()
	held, err := c.Acquire(ctx, "work", 2*time.Second, core.InNamespace("asynq"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	h := wrap(t, c, func(context.Context, *asynq.Task) error {
		t.Error("handler ran while the key was held")
		return nil
	})
	err = h.ProcessTask(ctx, asynq.NewTask("work", nil))
	var kb *asynqlock.KeyBusyError
	if !errors.As(err, &kb) || !errors.Is(err, asynqlock.ErrKeyBusy) || !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("err = %v, want a *KeyBusyError", err)
	}
	if kb.Key != "work" || kb.RetryAfter <= time.Second || kb.RetryAfter > 2*time.Second || kb.ErrorType() != "key_busy" {
		t.Fatalf("KeyBusyError{%q, %v}, want key work and RetryAfter in (1s, 2s]", kb.Key, kb.RetryAfter)
	}
}

func TestMiddleware_withWait(t *testing.T) {
	rdb, c := setup(t)
	ctx := context.Background()
	held, err := c.Acquire(ctx, "work", 2*time.Second, core.InNamespace("asynq"))
	if err != nil {
		t.Fatal(err)
	}
	// A short wait runs out.
	h := wrap(t, c, func(context.Context, *asynq.Task) error { return nil }, asynqlock.WithWait(50*time.Millisecond))
	start := time.Now()
	if err := h.ProcessTask(ctx, asynq.NewTask("work", nil)); !errors.Is(err, asynqlock.ErrKeyBusy) {
		t.Fatalf("err = %v, want ErrKeyBusy", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("gave up after %v, want a 50ms wait", d)
	}
	// A long one is woken by the release.
	ran := make(chan int64, 1)
	done := make(chan error, 1)
	h = wrap(t, c, func(ctx context.Context, _ *asynq.Task) error {
		l, _ := core.FromContext(ctx)
		ran <- l.Fence()
		return nil
	}, asynqlock.WithWait(10*time.Second))
	go func() { done <- h.ProcessTask(ctx, asynq.NewTask("work", nil)) }()
	locktest.Eventually(t, 5*time.Second, "the task to wait", func() bool {
		ch := locktest.Key("@asynq/work", "released")
		return rdb.PubSubNumSub(ctx, ch).Val()[ch] == 1
	})
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if f := receive(t, ran, 5*time.Second, "the waiting task to run"); f <= held.Fence() {
		t.Fatalf("fence %d, want above the previous holder's %d", f, held.Fence())
	}
	if err := receive(t, done, 5*time.Second, "the task to return"); err != nil {
		t.Fatal(err)
	}
}

func TestMiddleware_handlerError_andPanic_releaseTheLock(t *testing.T) {
	rdb, c := setup(t)
	ctx := context.Background()
	boom := errors.New("boom")
	h := wrap(t, c, func(context.Context, *asynq.Task) error { return boom })
	if err := h.ProcessTask(ctx, asynq.NewTask("work", nil)); err != boom {
		t.Fatalf("err = %v, want the handler's error unchanged", err)
	}
	h = wrap(t, c, func(context.Context, *asynq.Task) error { panic("boom") })
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not propagate")
			}
		}()
		_ = h.ProcessTask(ctx, asynq.NewTask("work", nil))
	}()
	if locktest.Held(t, rdb, locktest.Key("@asynq/work")) {
		t.Fatal("lock still held after the handler panicked")
	}
}

func TestMiddleware_lockTakenOver_failsSucceededTask(t *testing.T) {
	rdb, c := setup(t)
	ctx := context.Background()
	h := wrap(t, c, func(ctx context.Context, _ *asynq.Task) error {
		l, _ := core.FromContext(ctx)
		// Another owner takes the key over before the watchdog notices: the release finds out.
		if err := rdb.Del(ctx, l.Key()).Err(); err != nil {
			return err
		}
		return rdb.Set(ctx, l.Key(), "someone-else\x001\x00h\x000\x020000000000000000\x00\x00\x00", time.Minute).Err() // a lock value, see core/internal/script/lua/lock.lua
	})
	err := h.ProcessTask(ctx, asynq.NewTask("work", nil))
	if !errors.Is(err, core.ErrLost) {
		t.Fatalf("err = %v, want core.ErrLost for a handler that returned nil", err)
	}
	if !locktest.HeldBy(t, rdb, locktest.Key("@asynq/work"), "someone-else") {
		t.Fatal("the release touched the other owner's lock")
	}
}

// A key taken from a task (here a header a producer may fill from user input) names a lock in the
// middleware's namespace only: it cannot hold, or be blocked by, another component's lock.
func TestMiddleware_keyCannotReachAnotherNamespace(t *testing.T) {
	_, c := setup(t)
	ctx := context.Background()
	job, err := c.Acquire(ctx, "billing", 10*time.Second, core.InNamespace("cron"))
	if err != nil {
		t.Fatal(err)
	}
	defer job.Release(ctx)
	var names []string
	h := wrap(t, c, func(ctx context.Context, _ *asynq.Task) error {
		l, _ := core.FromContext(ctx)
		names = append(names, l.Name())
		return nil
	}, asynqlock.WithKey(asynqlock.ByHeader("key")))
	for _, hostile := range []string{"cron/billing", "@cron/billing", "../@cron/billing", "{@cron/billing}"} {
		task := asynq.NewTaskWithHeaders("work", nil, map[string]string{"key": hostile})
		if err := h.ProcessTask(ctx, task); err != nil {
			t.Fatalf("key %q: %v", hostile, err)
		}
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "@asynq/") {
			t.Fatalf("task lock %q outside the asynq namespace", n)
		}
	}
	// On purpose: the same namespace excludes the job.
	h = wrap(t, c, func(context.Context, *asynq.Task) error { return nil }, asynqlock.WithNamespace("cron"),
		asynqlock.WithKey(asynqlock.ByHeader("key")))
	err = h.ProcessTask(ctx, asynq.NewTaskWithHeaders("work", nil, map[string]string{"key": "billing"}))
	if !errors.Is(err, asynqlock.ErrKeyBusy) {
		t.Fatalf("err = %v, want ErrKeyBusy from the job's lock", err)
	}
}
