package asynqlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/jobs/asynqlock"
)

// BenchmarkMiddleware_uncontended is the cost the middleware adds to a task whose key is free: one
// round trip to take the lock, one to release it, against a real redis-server on loopback.
func BenchmarkMiddleware_uncontended(b *testing.B) {
	_, c := setup(b)
	h := newMiddleware(b, c, asynqlock.WithKey(asynqlock.ByJSONField("customer_id")))(
		asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil }))
	task := asynq.NewTask("invoice", []byte(`{"customer_id":"c-42","amount":1200}`))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := h.ProcessTask(ctx, task); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMiddleware_busy is the cost of turning a busy task away: one round trip.
func BenchmarkMiddleware_busy(b *testing.B) {
	_, c := setup(b)
	ctx := context.Background()
	held, err := c.Acquire(ctx, "invoice", 10*time.Second, core.InNamespace("asynq"))
	if err != nil {
		b.Fatal(err)
	}
	defer held.Release(ctx)
	h := newMiddleware(b, c)(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil }))
	task := asynq.NewTask("invoice", nil)
	b.ReportAllocs()
	for b.Loop() {
		if err := h.ProcessTask(ctx, task); err == nil {
			b.Fatal("busy key acquired")
		}
	}
}

func BenchmarkByJSONField(b *testing.B) {
	key := asynqlock.ByJSONField("customer_id")
	task := asynq.NewTask("invoice", []byte(`{"customer_id":"c-42","amount":1200,"lines":[{"sku":"a","n":2}]}`))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if k, _ := key(ctx, task); k != "c-42" {
			b.Fatal(k)
		}
	}
}
