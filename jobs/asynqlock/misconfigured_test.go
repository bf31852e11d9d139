package asynqlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// A Redis that refuses the lock for a configuration reason (a wrong password, an ACL user missing
// a grant) fails the task with asynq.SkipRetry: a real server archives it after one attempt,
// without running the handler, instead of retrying it; the error names what Redis refused. An
// outage is retried as before.
func TestMisconfigured_archivedAtOnce(t *testing.T) {
	srv := redistest.Start(t, redistest.WithACL("user app on >pw ~* &* +@all", "user nogrant on >pw ~* &* +@all -evalsha"))
	rdb := srv.Client(t) // asynq's own connection: user app
	for _, tc := range []struct{ name, user, pass, says string }{
		{"wrong password", "app", "wrong", "WRONGPASS"},
		{"missing grant", "nogrant", "pw", "NOPERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := srv.Options()
			o.Username, o.Password = tc.user, tc.pass
			locks := newLocks(t, redisClient(t, o))
			errs := newErrLog()
			queue := strings.ReplaceAll(tc.name, " ", "-")
			cfg := config(1, errs)
			cfg.Queues = map[string]int{queue: 1}
			ran := make(chan struct{}, 1)
			startServer(t, rdb, cfg, newMiddleware(t, locks), func(context.Context, *asynq.Task) error {
				ran <- struct{}{}
				return nil
			})
			if _, err := newEnqueuer(rdb).Enqueue(asynq.NewTask("work", nil), asynq.Queue(queue), asynq.MaxRetry(5)); err != nil {
				t.Fatal(err)
			}
			err := receive(t, errs.ch, 10*time.Second, "the task's error")
			if !errors.Is(err, core.ErrMisconfigured) || !errors.Is(err, asynq.SkipRetry) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("task error %v, want ErrMisconfigured and asynq.SkipRetry, naming %s", err, tc.says)
			}
			in := newInspector(rdb)
			t.Cleanup(func() { _ = in.Close() })
			locktest.Eventually(t, 10*time.Second, "the task archived", func() bool {
				tasks, err := in.ListArchivedTasks(queue)
				return err == nil && len(tasks) == 1 && tasks[0].Retried == 0
			})
			if len(errs.all()) != 1 || len(ran) != 0 {
				t.Fatalf("%d attempts failed, handler ran %d times, want 1 and 0", len(errs.all()), len(ran))
			}
		})
	}
	srv.Stop(t) // an outage: retried
	o := srv.Options()
	o.MaxRetries = -1
	h := wrap(t, newLocks(t, redisClient(t, o)), func(context.Context, *asynq.Task) error { return nil })
	if err := h.ProcessTask(context.Background(), asynq.NewTask("work", nil)); !errors.Is(err, core.ErrUnavailable) || errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("Redis down: %v, want ErrUnavailable and no SkipRetry", err)
	}
}
