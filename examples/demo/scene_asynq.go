package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/jobs/asynqlock"
	"go.opentelemetry.io/otel/trace"
)

// sceneAsynq: two asynq servers ("workers", each with its own connections and lock client) share a
// queue; asynqlock's middleware locks each task's customer, so that the six tasks of one customer
// run one at a time, whichever worker picks them up.
func sceneAsynq(ctx context.Context, s *scene) error {
	const (
		tasks    = 6
		work     = 100 * time.Millisecond
		taskType = "invoice:send"
	)
	queue := "lockkit-demo-" + s.runID // a queue of this run's own, deleted at the end
	admin := s.newRedis()
	insp := asynq.NewInspectorFromRedisClient(admin)
	s.onClose(func() { _ = insp.DeleteQueue(queue, true) }) // runs after the servers stopped

	var (
		mu       sync.Mutex
		runs     []interval
		ran      = map[string]int{} // tasks per worker
		done     = make(chan struct{})
		failures atomic.Int64
		lastErr  atomic.Value
	)
	handler := func(worker string) asynq.HandlerFunc {
		return func(ctx context.Context, t *asynq.Task) error {
			l, ok := core.FromContext(ctx) // ctx is the lock's context
			if !ok {
				return errors.New("no lock in the task's context")
			}
			var p struct {
				Customer string `json:"customer"`
				Invoice  int    `json:"invoice"`
			}
			if err := json.Unmarshal(t.Payload(), &p); err != nil {
				return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
			}
			start := time.Now()
			if !sleep(ctx, work) {
				return context.Cause(ctx)
			}
			mu.Lock()
			defer mu.Unlock()
			ran[worker]++
			runs = append(runs, interval{label: fmt.Sprintf("invoice %d on %s", p.Invoice, worker),
				key: l.Name(), start: start, end: time.Now(), fence: l.Fence()})
			if len(runs) == tasks {
				close(done)
			}
			return nil
		}
	}
	for _, worker := range []string{"worker A", "worker B"} {
		locks, rdb, err := s.newLocks()
		if err != nil {
			return err
		}
		mw, err := asynqlock.Middleware(locks,
			asynqlock.WithKey(asynqlock.ByJSONField("customer")),
			asynqlock.WithWait(10*time.Second)) // a busy customer's task waits for the release, in the handler
		if err != nil {
			return err
		}
		srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
			Concurrency:       3,
			Queues:            map[string]int{queue: 1},
			TaskCheckInterval: 20 * time.Millisecond, // pick tasks up quickly (the default polls every second)
			IsFailure:         asynqlock.IsFailure(nil),
			RetryDelayFunc:    asynqlock.RetryDelayFunc(nil),
			ShutdownTimeout:   3 * time.Second,
			Logger:            discardLogger{},
			ErrorHandler: asynq.ErrorHandlerFunc(func(_ context.Context, _ *asynq.Task, err error) {
				failures.Add(1)
				lastErr.Store(err.Error())
			}),
		})
		mux := asynq.NewServeMux()
		mux.Use(taskSpan(s.tracing.tracer), mw)
		mux.Handle(taskType, handler(worker))
		if err := srv.Start(mux); err != nil {
			return err
		}
		s.onClose(srv.Shutdown)
	}
	s.logf("%d tasks for customer 42, 2 workers × 3 slots; each task works %v under the customer's lock", tasks, work)

	enq := asynq.NewClientFromRedisClient(admin)
	t0 := time.Now()
	for i := range tasks {
		payload := fmt.Sprintf(`{"customer":"42","invoice":%d}`, i+1)
		if _, err := enq.EnqueueContext(ctx, asynq.NewTask(taskType, []byte(payload)),
			asynq.Queue(queue), asynq.MaxRetry(3), asynq.Timeout(20*time.Second)); err != nil {
			return err
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("tasks not done: %w", ctx.Err())
	}
	mu.Lock()
	got := slices.Clone(runs)
	mu.Unlock()
	slices.SortFunc(got, func(a, b interval) int { return a.start.Compare(b.start) })
	s.timeline(t0, got)
	mu.Lock()
	s.check(len(got) == tasks, "all %d tasks ran (worker A: %d, worker B: %d)", len(got), ran["worker A"], ran["worker B"])
	mu.Unlock()
	s.check(overlaps(got) == 0, "no two tasks of customer 42 overlapped (%d overlaps)", overlaps(got))
	s.check(fencesIncrease(got), "their fencing tokens increase in the order they ran")
	if v, _ := lastErr.Load().(string); failures.Load() > 0 {
		s.check(false, "no task failed: %d failures, last: %s", failures.Load(), v)
	} else {
		s.check(true, "no task failed or was retried")
	}
	return nil
}

// taskSpan starts a span per task, so that the lock spans nest under it.
func taskSpan(tracer trace.Tracer) asynq.MiddlewareFunc {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			ctx, span := tracer.Start(ctx, "asynq "+t.Type(), trace.WithSpanKind(trace.SpanKindConsumer))
			defer span.End()
			return next.ProcessTask(ctx, t)
		})
	}
}

// discardLogger keeps asynq's own logging out of the demo's output.
type discardLogger struct{}

func (discardLogger) Debug(...any) {}
func (discardLogger) Info(...any)  {}
func (discardLogger) Warn(...any)  {}
func (discardLogger) Error(...any) {}
func (discardLogger) Fatal(...any) {}
