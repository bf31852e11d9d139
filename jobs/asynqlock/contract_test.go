package asynqlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/asynqlock"
	"github.com/redis/go-redis/v9"
)

// Invalid options give "lockkit: asynqlock: WHAT", matching core.ErrInvalid, "lockkit" once; the
// limit's bound is core.MaxPermits.
func TestOptions_errorShape(t *testing.T) {
	_, c := setup(t)
	for want, opts := range map[string][]asynqlock.Option{
		"lockkit: asynqlock: WithWait(-1s) is negative": {asynqlock.WithWait(-time.Second)},
		"lockkit: asynqlock: WithKey(nil)":              {asynqlock.WithKey(nil)},
		"lockkit: asynqlock: WithTTL(2s, 1s) must satisfy 10ms <= floor <= cap <= 24h0m0s": {
			asynqlock.WithTTL(2*time.Second, time.Second)},
		fmt.Sprintf("lockkit: asynqlock: WithLimit(%d) is outside [1, %d]", core.MaxPermits+1, core.MaxPermits): {
			asynqlock.WithLimit(core.MaxPermits + 1)},
		"lockkit: asynqlock: WithLimit and WithLimitFunc cannot be combined: give one": {
			asynqlock.WithLimit(2), asynqlock.WithLimitFunc(func(context.Context, *asynq.Task) int { return 2 })},
		`lockkit: asynqlock: WithNamespace("Cron/") must be 1 to 64 of a-z, 0-9 and '-'`: {asynqlock.WithNamespace("Cron/")},
	} {
		_, err := asynqlock.Middleware(c, opts...)
		if !errors.Is(err, core.ErrInvalid) || err == nil || err.Error() != want || strings.Count(err.Error(), "lockkit") != 1 {
			t.Errorf("error %v, want %q matching core.ErrInvalid", err, want)
		}
	}
	if _, err := asynqlock.Middleware(nil); err == nil || err.Error() != "lockkit: asynqlock: Middleware needs a *core.Client" {
		t.Errorf("nil client: %v", err)
	}
	if _, err := asynqlock.Middleware(c, asynqlock.WithLimit(core.MaxPermits)); err != nil {
		t.Errorf("WithLimit(core.MaxPermits): %v", err)
	}
}

// A failed release is never silent: without WithLogger it goes to slog.Default(); a discarding
// logger silences it.
func TestOptions_loggerDefaultsToSlogDefault(t *testing.T) {
	var logs locktest.SyncBuffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	for _, quiet := range []bool{true, false} {
		srv := redistest.Start(t)
		o := srv.Options()
		o.MaxRetries = -1
		rdb := redis.NewClient(o)
		defer rdb.Close()
		var opts []asynqlock.Option
		if quiet {
			opts = append(opts, asynqlock.WithLogger(slog.New(slog.DiscardHandler)))
		}
		h := wrap(t, newLocks(t, rdb), func(context.Context, *asynq.Task) error {
			srv.Stop(t) // the release that follows cannot reach Redis
			return nil
		}, opts...)
		if err := h.ProcessTask(context.Background(), asynq.NewTask("report", nil)); err != nil {
			t.Fatalf("a task whose release failed: %v (the task itself is done)", err)
		}
		logged := strings.Contains(logs.String(), "lockkit: asynqlock: release failed")
		if logged == quiet {
			t.Fatalf("quiet=%v: logged to slog.Default(): %v (%q)", quiet, logged, logs.String())
		}
	}
}
