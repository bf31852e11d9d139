package asynqlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/jobs/asynqlock"
)

// A handler that hangs past its task's deadline, ignoring its context, gives its key back at the
// deadline (core.WithMaxHold), not when it returns; the task then fails with ErrMaxHold. Both a lock
// and a permit (WithLimit).
func TestMiddleware_holdEndsAtTheDeadline(t *testing.T) {
	_, c := setup(t)
	for _, tc := range []struct {
		name string
		opts []asynqlock.Option
	}{{"lock", nil}, {"permit", []asynqlock.Option{asynqlock.WithLimit(2)}}} {
		t.Run(tc.name, func(t *testing.T) {
			const deadline = 800 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			hung, started := make(chan struct{}), make(chan struct{})
			h := wrap(t, c, func(context.Context, *asynq.Task) error {
				close(started)
				<-hung // ignores its context
				return nil
			}, append(tc.opts, asynqlock.WithTTL(300*time.Millisecond, 300*time.Millisecond))...)
			done := make(chan error, 1)
			go func() { done <- h.ProcessTask(ctx, asynq.NewTask("hung-"+tc.name, nil)) }()
			<-started
			free := func() bool {
				info, err := c.Inspect(context.Background(), "@asynq/hung-"+tc.name)
				if err != nil {
					t.Log(err)
				}
				return err == nil && !info.Held && len(info.Permits) == 0
			}
			if free() {
				t.Fatal("key not held while the handler runs")
			}
			locktest.Eventually(t, 3*time.Second, "the key free while the handler hangs", free)
			held := time.Since(start)
			t.Logf("key given back %v after the task started (deadline %v)", held, deadline)
			if held < deadline-50*time.Millisecond || held > deadline+300*time.Millisecond {
				t.Fatalf("key given back after %v, want at the deadline %v", held, deadline)
			}
			close(hung)
			if err := <-done; !errors.Is(err, core.ErrMaxHold) {
				t.Fatalf("task error %v, want ErrMaxHold", err)
			}
		})
	}
}
