package cronlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/cronlock"
)

// A run that hangs past its maximum hold (WithMaxHold, or by default the larger of the period and
// the TTL) has its context cancelled with ErrMaxHold while its replica is healthy and renewing;
// the lock is free again, no marker is written, and the firing reports OutcomeMaxHold.
func TestWithMaxHold_endsAHungRun(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []cronlock.Option
		want time.Duration // the maximum hold; renewals every third of the TTL
	}{
		{"explicit", []cronlock.Option{cronlock.WithMaxHold(700 * time.Millisecond), cronlock.WithTTL(300 * time.Millisecond)}, 700 * time.Millisecond},
		{"default-period", []cronlock.Option{cronlock.WithTTL(300 * time.Millisecond)}, time.Second}, // "* * * * * *"
		{"default-ttl", []cronlock.Option{cronlock.WithTTL(1500 * time.Millisecond)}, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := "hung-" + tc.name
			var held time.Duration
			var cause error
			ev := fire(t, c, tick, job, func(jctx context.Context) error {
				start := time.Now()
				select {
				case <-jctx.Done():
				case <-time.After(5 * time.Second):
					return errors.New("job context not cancelled at the maximum hold")
				}
				held, cause = time.Since(start), context.Cause(jctx)
				// The lock was given back: another replica can take the job now.
				other, err := c.TryAcquire(ctx, job, time.Second, core.InNamespace("cron"))
				if err != nil {
					return fmt.Errorf("lock not free after the maximum hold: %w", err)
				}
				_ = other.Release(ctx)
				return jctx.Err()
			}, tc.opts...)
			t.Logf("held %v, cause %v", held, cause)
			var mh *core.MaxHoldError
			if !errors.As(cause, &mh) || !errors.Is(cause, core.ErrMaxHold) || errors.Is(cause, core.ErrLost) {
				t.Fatalf("cause = %v, want a *MaxHoldError", cause)
			}
			if held < tc.want-50*time.Millisecond || held > tc.want+200*time.Millisecond {
				t.Fatalf("held %v, want %v", held, tc.want)
			}
			if ev.Outcome != cronlock.OutcomeMaxHold || !errors.Is(ev.Err, core.ErrMaxHold) {
				t.Fatalf("%+v, want max_hold", ev)
			}
			if n := rdb.Exists(ctx, fmt.Sprintf("lockkit:cron:{@cron/%s}:%d", job, tick.Unix())).Val(); n != 0 {
				t.Fatal("marker written for a run ended by its maximum hold")
			}
		})
	}
	if _, err := cronlock.New(c, cronlock.WithMaxHold(-time.Second)); !errors.Is(err, cronlock.ErrInvalid) {
		t.Fatalf("negative max hold: %v", err)
	}
}
