package asynqlock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/asynqlock"
)

// WithLimit(3): 12 tasks of one key on two servers of 4 workers each run at most 3 at once, and
// all complete without using up a retry (MaxRetry(1): busy tasks fail and are retried, but not
// counted; on a counted retry the next one would wait instead, as a last attempt).
func TestMiddleware_withLimit_atMostNAtOnce_noRetriesUsed(t *testing.T) {
	srv := redistest.Start(t)
	var inside, maxInside, runs atomic.Int64
	var mu sync.Mutex
	fences := map[int64]bool{}
	h := func(ctx context.Context, _ *asynq.Task) error {
		p, ok := core.FromContext(ctx)
		if !ok || p.Limit() != 3 || p.Name() != "@asynq/work" {
			return errors.New("no permit in the handler's context")
		}
		mu.Lock()
		dup := fences[p.Fence()]
		fences[p.Fence()] = true
		mu.Unlock()
		if dup {
			return errors.New("fence seen twice")
		}
		n := inside.Add(1)
		defer inside.Add(-1)
		for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
		}
		time.Sleep(30 * time.Millisecond) // the work: a window for a 4th to overlap
		runs.Add(1)
		return nil
	}
	errs := newErrLog()
	for range 2 {
		rdb := srv.Client(t)
		locks := newLocks(t, rdb)
		startServer(t, rdb, config(4, errs), newMiddleware(t, locks, asynqlock.WithLimit(3), asynqlock.WithTTL(time.Second, time.Second)), h)
	}
	rdb := srv.Client(t)
	enq := newEnqueuer(rdb)
	defer enq.Close()
	const n = 12
	var ids []string
	for range n {
		info, err := enq.Enqueue(asynq.NewTask("work", nil), asynq.MaxRetry(1), asynq.Retention(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	insp := newInspector(rdb)
	defer insp.Close()
	locktest.Eventually(t, 20*time.Second, "every task to complete", func() bool { return runs.Load() == n })
	if maxInside.Load() != 3 {
		t.Fatalf("at most %d tasks of the key ran at once, want 3", maxInside.Load())
	}
	busy := 0
	for _, err := range errs.all() {
		if !errors.Is(err, asynqlock.ErrKeyBusy) {
			t.Fatalf("task error %v, want only key-busy errors", err)
		}
		busy++
	}
	if busy == 0 {
		t.Fatal("no task found the key busy: the test did not exercise the busy path")
	}
	t.Logf("%d busy retries", busy)
	for _, id := range ids {
		locktest.Eventually(t, 5*time.Second, "task "+id+" completed", func() bool {
			ti, err := insp.GetTaskInfo("default", id)
			return err == nil && ti.State == asynq.TaskStateCompleted && ti.Retried == 0
		})
	}
}

// WithLimitFunc takes the limit from the task; a limit out of range fails the task with ErrInvalid.
func TestMiddleware_withLimitFunc(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locks := newLocks(t, rdb)
	got := make(chan int, 4)
	errs := newErrLog()
	limit := asynqlock.WithLimitFunc(func(_ context.Context, t *asynq.Task) int {
		n, _ := strconv.Atoi(string(t.Payload()))
		return n
	})
	startServer(t, rdb, config(2, errs), newMiddleware(t, locks, limit), func(ctx context.Context, _ *asynq.Task) error {
		p, _ := core.FromContext(ctx)
		got <- p.Limit()
		return nil
	})
	enq := newEnqueuer(rdb)
	defer enq.Close()
	if _, err := enq.Enqueue(asynq.NewTask("work", []byte("5")), asynq.MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	if n := receive(t, got, 10*time.Second, "the task"); n != 5 {
		t.Fatalf("permit limit %d, want 5 (from the payload)", n)
	}
	if _, err := enq.Enqueue(asynq.NewTask("work", []byte("0")), asynq.MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, errs.ch, 10*time.Second, "the task's error"); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("limit 0: %v, want ErrInvalid", err)
	}
}

func TestMiddleware_withLimit_invalid(t *testing.T) {
	srv := redistest.Start(t)
	locks := newLocks(t, srv.Client(t))
	for _, o := range []asynqlock.Option{asynqlock.WithLimit(0), asynqlock.WithLimit(100001), asynqlock.WithLimitFunc(nil)} {
		if _, err := asynqlock.Middleware(locks, o); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%v, want ErrInvalid", err)
		}
	}
}
