package asynqlock_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
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

// run is one successful handler run, as the handler saw it.
type run struct {
	key, id    string
	start, end time.Time
	fence      int64
	retried    int
}

// recorder is a handler that records its runs and counts overlapping runs of one key directly.
type recorder struct {
	work     time.Duration
	want     int
	done     chan struct{}
	mu       sync.Mutex
	runs     []run
	active   map[string]int
	overlaps int
}

func newRecorder(work time.Duration, want int) *recorder {
	return &recorder{work: work, want: want, done: make(chan struct{}), active: map[string]int{}}
}

func (r *recorder) handle(ctx context.Context, _ *asynq.Task) error {
	start := time.Now()
	l, ok := core.FromContext(ctx)
	if !ok {
		return errors.New("no lock in the handler's context")
	}
	id, _ := asynq.GetTaskID(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	key := strings.TrimPrefix(l.Name(), "@asynq/")
	r.mu.Lock()
	r.active[key]++
	if r.active[key] > 1 {
		r.overlaps++
	}
	r.mu.Unlock()
	t := time.NewTimer(r.work) // the task's work
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	end := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active[key]--
	if err := ctx.Err(); err != nil {
		return err
	}
	r.runs = append(r.runs, run{key: key, id: id, start: start, end: end, fence: l.Fence(), retried: retried})
	if len(r.runs) == r.want {
		close(r.done)
	}
	return nil
}

func TestMiddleware_threeServers_keysNeverOverlap(t *testing.T) {
	const (
		servers, concurrency = 3, 4
		tasks, keys          = 200, 10
	)
	srv := redistest.Start(t)
	rec := newRecorder(20*time.Millisecond, tasks) // long enough that a task meets its key held, even on a loaded host
	errs := newErrLog()
	for range servers { // one "process" each: its own Redis clients and core.Client
		rdb := srv.Client(t)
		locks := newLocks(t, rdb)
		mw := newMiddleware(t, locks, asynqlock.WithKey(asynqlock.ByJSONField("key")),
			asynqlock.WithTTL(100*time.Millisecond, 300*time.Millisecond))
		startServer(t, rdb, config(concurrency, errs), mw, rec.handle)
	}
	rdb := srv.Client(t)
	enq := newEnqueuer(rdb)
	for i := range tasks {
		payload := fmt.Sprintf(`{"key":"k%d","n":%d}`, i%keys, i)
		// MaxRetry(1): a busy key that used up retries would get the task archived after one retry.
		if _, err := enq.Enqueue(asynq.NewTask("work", []byte(payload)), asynq.MaxRetry(1),
			asynq.Retention(time.Hour), asynq.Timeout(10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	receive(t, rec.done, 35*time.Second, fmt.Sprintf("%d tasks to complete", tasks))

	rec.mu.Lock()
	runs := append([]run(nil), rec.runs...)
	overlaps := rec.overlaps
	rec.mu.Unlock()
	if overlaps != 0 {
		t.Errorf("%d runs started while another run of their key was active", overlaps)
	}
	byKey := map[string][]run{}
	ids := map[string]bool{}
	for _, r := range runs {
		byKey[r.key] = append(byKey[r.key], r)
		if ids[r.id] {
			t.Errorf("task %s ran successfully twice", r.id)
		}
		ids[r.id] = true
		if r.retried != 0 {
			t.Errorf("task %s ran with retry count %d, want 0 (busy retries must not count)", r.id, r.retried)
		}
	}
	if len(byKey) != keys {
		t.Fatalf("runs over %d keys, want %d", len(byKey), keys)
	}
	for key, rs := range byKey {
		sort.Slice(rs, func(i, j int) bool { return rs[i].start.Before(rs[j].start) })
		for i := 1; i < len(rs); i++ {
			prev, cur := rs[i-1], rs[i]
			if cur.start.Before(prev.end) {
				t.Errorf("key %s: task %s [%v, %v] overlaps task %s [%v, %v]", key, cur.id,
					cur.start.UnixNano(), cur.end.UnixNano(), prev.id, prev.start.UnixNano(), prev.end.UnixNano())
			}
			if cur.fence <= prev.fence {
				t.Errorf("key %s: fence %d of task %s after fence %d of task %s, want strictly increasing",
					key, cur.fence, cur.id, prev.fence, prev.id)
			}
		}
	}

	busy := 0
	for _, err := range errs.all() {
		if !errors.Is(err, asynqlock.ErrKeyBusy) {
			t.Errorf("task failed with %v, want only key-busy errors", err)
		}
		busy++
	}
	if busy == 0 {
		t.Error("no task found its key busy: the test did not exercise contention")
	}
	// asynq's own records: all completed, none archived, no retry counted.
	insp := newInspector(rdb)
	var completed []*asynq.TaskInfo
	locktest.Eventually(t, 5*time.Second, "asynq to mark every task completed", func() bool {
		var err error
		completed, err = insp.ListCompletedTasks("default", asynq.PageSize(tasks+1))
		if err != nil {
			t.Fatal(err)
		}
		return len(completed) == tasks
	})
	for _, ti := range completed {
		if ti.Retried != 0 {
			t.Errorf("task %s: asynq counted %d retries, want 0", ti.ID, ti.Retried)
		}
	}
	qi, err := insp.GetQueueInfo("default")
	if err != nil {
		t.Fatal(err)
	}
	if qi.Archived != 0 || qi.Failed != 0 {
		t.Errorf("queue: %d archived, %d failed today, want 0 and 0", qi.Archived, qi.Failed)
	}
	t.Logf("%d tasks over %d keys on %d servers: %d busy retries, none counted as a failure", tasks, keys, servers, busy)
}

func TestMiddleware_lostLock_cancelsHandler_andFailsTask(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locks := newLocks(t, rdb)
	errs := newErrLog()
	started := make(chan *core.Lock, 1)
	causes := make(chan error, 1)
	var returned atomic.Bool
	mw := newMiddleware(t, locks, asynqlock.WithTTL(300*time.Millisecond, 300*time.Millisecond))
	startServer(t, rdb, config(1, errs), mw, func(ctx context.Context, _ *asynq.Task) error {
		l, _ := core.FromContext(ctx)
		started <- l
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
		case <-time.After(5 * time.Second):
			causes <- nil
		}
		returned.Store(true)
		return nil // the handler "succeeds"; the task must fail all the same
	})
	if _, err := newEnqueuer(rdb).Enqueue(asynq.NewTask("work", nil), asynq.MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	l := receive(t, started, 5*time.Second, "the handler to start")
	if l == nil {
		t.Fatal("no lock in the handler's context")
	}
	// Someone else takes the key over: the watchdog's next renewal finds the lock is not ours.
	if err := rdb.Del(context.Background(), l.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	if cause := receive(t, causes, 5*time.Second, "the handler's context"); !errors.Is(cause, core.ErrLost) {
		t.Fatalf("handler's context ended with cause %v, want core.ErrLost", cause)
	}
	err := receive(t, errs.ch, 5*time.Second, "the task's error")
	if !returned.Load() || !errors.Is(err, core.ErrLost) {
		t.Fatalf("task error = %v (handler returned: %v), want core.ErrLost", err, returned.Load())
	}
}
