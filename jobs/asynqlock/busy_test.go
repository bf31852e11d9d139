package asynqlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/asynqlock"
)

// busyServer starts one asynq server keyed by task type, and a second core.Client standing for
// another process that holds the key "work". It returns the holder's lock, the task's ID, and
// channels of the retry counts the handler saw.
func busyServer(t *testing.T, cfg asynq.Config, maxRetry int) (held *core.Lock, id string, insp *asynq.Inspector, runs chan int) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	other := newLocks(t, srv.Client(t))
	held, err := other.Acquire(context.Background(), "work", 300*time.Millisecond, core.InNamespace("asynq"))
	if err != nil {
		t.Fatal(err)
	}
	locks := newLocks(t, rdb)
	runs = make(chan int, 4)
	startServer(t, rdb, cfg, newMiddleware(t, locks, asynqlock.WithTTL(300*time.Millisecond, time.Second)),
		func(ctx context.Context, _ *asynq.Task) error {
			n, _ := asynq.GetRetryCount(ctx)
			runs <- n
			return nil
		})
	info, err := newEnqueuer(rdb).Enqueue(asynq.NewTask("work", nil), asynq.MaxRetry(maxRetry), asynq.Retention(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return held, info.ID, newInspector(rdb), runs
}

func TestMiddleware_busyKey_retriedWithoutUsingRetries_thenSucceeds(t *testing.T) {
	errs := newErrLog()
	// MaxRetry(1): if busy errors counted, the second one would find the retries used up.
	held, id, insp, runs := busyServer(t, config(2, errs), 1)
	for i := range 3 {
		err := receive(t, errs.ch, 10*time.Second, "a key-busy error")
		var kb *asynqlock.KeyBusyError
		if !errors.As(err, &kb) || !errors.Is(err, asynqlock.ErrKeyBusy) || !errors.Is(err, core.ErrNotAcquired) {
			t.Fatalf("error %d = %v, want a *KeyBusyError", i, err)
		}
		// The holder renews a 300ms TTL every 100ms: its remaining TTL is 200-300ms.
		if kb.Key != "work" || kb.RetryAfter <= 0 || kb.RetryAfter > 300*time.Millisecond {
			t.Fatalf("KeyBusyError{Key: %q, RetryAfter: %v}, want key work and 0 < RetryAfter <= 300ms", kb.Key, kb.RetryAfter)
		}
	}
	ti, err := insp.GetTaskInfo("default", id)
	if err != nil {
		t.Fatal(err)
	}
	if ti.Retried != 0 {
		t.Fatalf("after 3 busy errors asynq counted %d retries, want 0", ti.Retried)
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := receive(t, runs, 10*time.Second, "the task to run"); n != 0 {
		t.Fatalf("handler ran with retry count %d, want 0", n)
	}
	locktest.Eventually(t, 5*time.Second, "the task to complete", func() bool {
		ti, err = insp.GetTaskInfo("default", id)
		return err == nil && ti.State == asynq.TaskStateCompleted
	})
	if ti.Retried != 0 {
		t.Fatalf("completed task: %d retries counted, want 0", ti.Retried)
	}
}

// Without the helpers asynq counts a busy key as a failure and increments the retry count. The
// task's last attempt then waits for the key instead of failing, which would get it archived.
func TestMiddleware_busyKey_withoutHelpers_usesRetry_lastAttemptWaits(t *testing.T) {
	errs := newErrLog()
	cfg := config(2, errs)
	cfg.IsFailure = nil
	cfg.RetryDelayFunc = func(int, error, *asynq.Task) time.Duration { return 10 * time.Millisecond }
	held, id, insp, runs := busyServer(t, cfg, 1)
	if err := receive(t, errs.ch, 10*time.Second, "a key-busy error"); !errors.Is(err, asynqlock.ErrKeyBusy) {
		t.Fatalf("err = %v, want ErrKeyBusy", err)
	}
	// asynq counted the retry; the next attempt is the last one and waits for the key.
	locktest.Eventually(t, 5*time.Second, "the last attempt to wait for the key", func() bool {
		ti, err := insp.GetTaskInfo("default", id)
		if err != nil {
			t.Fatal(err)
		}
		return ti.Retried == 1 && ti.State == asynq.TaskStateActive
	})
	select {
	case err := <-errs.ch:
		t.Fatalf("last attempt failed with %v, want it to wait", err)
	case n := <-runs:
		t.Fatalf("task ran (retry count %d) while the key was held", n)
	case <-time.After(500 * time.Millisecond): // the holder renews its 300ms TTL meanwhile
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := receive(t, runs, 5*time.Second, "the task to run"); n != 1 {
		t.Fatalf("handler ran with retry count %d, want 1", n)
	}
	locktest.Eventually(t, 5*time.Second, "the task to complete", func() bool {
		ti, err := insp.GetTaskInfo("default", id)
		return err == nil && ti.State == asynq.TaskStateCompleted
	})
}

// asynq delivers at least once: the same task (same queue and ID) may run twice. Two servers on two
// Redis databases hold the same task, as after a redelivery; both share the lock database.
func TestMiddleware_sameTaskTwice_reentersInsteadOfDeadlocking(t *testing.T) {
	srv := redistest.Start(t)
	lockRDB := srv.Client(t)
	entered := make(chan *core.Lock, 2)
	proceed := make(chan struct{})
	finished := make(chan struct{}, 2)
	errs := newErrLog()
	var enqueueDBs []*asynq.Client
	for db := range 2 {
		opt := srv.Options()
		opt.DB = db
		rdb := redisClient(t, opt)
		locks := newLocks(t, srv.Client(t))
		startServer(t, rdb, config(1, errs), newMiddleware(t, locks, asynqlock.WithTTL(300*time.Millisecond, time.Second)),
			func(ctx context.Context, _ *asynq.Task) error {
				l, _ := core.FromContext(ctx)
				entered <- l
				select {
				case <-proceed:
				case <-ctx.Done():
				}
				finished <- struct{}{}
				return ctx.Err()
			})
		enqueueDBs = append(enqueueDBs, newEnqueuer(rdb))
	}
	for _, enq := range enqueueDBs {
		if _, err := enq.Enqueue(asynq.NewTask("work", nil), asynq.TaskID("order-7")); err != nil {
			t.Fatal(err)
		}
	}
	a := receive(t, entered, 10*time.Second, "the first delivery")
	b := receive(t, entered, 10*time.Second, "the second delivery while the first holds the lock")
	close(proceed)
	if a == nil || b == nil {
		t.Fatal("no lock in the handler's context")
	}
	if a.Token() != b.Token() || a.Fence() != b.Fence() || (a.Holds() > 1) == (b.Holds() > 1) {
		t.Fatalf("deliveries: token equal %v, fences %d %d, reentrant %v %v; want one lock re-entered",
			a.Token() == b.Token(), a.Fence(), b.Fence(), a.Holds() > 1, b.Holds() > 1)
	}
	receive(t, finished, 5*time.Second, "the first handler to finish")
	receive(t, finished, 5*time.Second, "the second handler to finish")
	locktest.Eventually(t, 5*time.Second, "both holds to be released", func() bool {
		return !locktest.Held(t, lockRDB, a.Key())
	})
	if e := errs.all(); len(e) != 0 {
		t.Fatalf("task errors: %v", e)
	}
}
