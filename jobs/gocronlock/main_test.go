package gocronlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/exactlyonce"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/jobs/gocronlock"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { locktest.VerifyTestMain(m) }

// newLocker returns a Locker over c.
func newLocker(t testing.TB, c *core.Client, opts ...gocronlock.Option) *gocronlock.Locker {
	t.Helper()
	l, err := gocronlock.NewLocker(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// newScheduler returns a gocron scheduler, shut down when the test ends.
func newScheduler(t testing.TB, opts ...gocron.SchedulerOption) gocron.Scheduler {
	t.Helper()
	s, err := gocron.NewScheduler(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, s) })
	return s
}

// shutdown shuts s down, waiting for its running jobs; shutting down twice is harmless.
func shutdown(t testing.TB, s gocron.Scheduler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.ShutdownWithContext(ctx); err != nil && !errors.Is(err, gocron.ErrStopSchedulerTimedOut) {
		t.Logf("shutdown: %v", err)
	}
}

// markerValue returns the payload of a completion marker ("ok" or "failed"), "" if absent.
func markerValue(t testing.TB, rdb redis.UniversalClient, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	rec, err := exactlyonce.Decode(v)
	if err != nil {
		t.Fatalf("marker %q: %v", v, err)
	}
	return rec.Payload
}

// outcome is what one firing of a job on one replica came to: the job ran (ctx is its context,
// err what it returned) or Lock failed (lockErr).
type outcome struct {
	tick    time.Time
	fence   int64
	ran     bool
	ctx     context.Context
	err     error
	lockErr error
}

// fakeReplica is a scheduler on a fake clock with its Locker: the test moves its clock to make it
// fire, so that every step is deterministic.
type fakeReplica struct {
	clock    *clockwork.FakeClock
	s        gocron.Scheduler
	l        *gocronlock.Locker
	outcomes chan outcome
}

// newFakeReplica starts a scheduler on a fake clock at start, with job name on def. work is the
// job (nil: return at once); every firing sends an outcome.
func newFakeReplica(t *testing.T, c *core.Client, start time.Time, def gocron.JobDefinition, name string,
	work func(ctx context.Context) error, opts ...gocronlock.Option) *fakeReplica {
	t.Helper()
	r := &fakeReplica{clock: clockwork.NewFakeClockAt(start), outcomes: make(chan outcome, 16)}
	r.s = newScheduler(t, gocron.WithClock(r.clock), gocron.WithLocation(time.UTC))
	r.l = newLocker(t, c, append([]gocronlock.Option{gocronlock.WithClock(r.clock.Now), gocronlock.WithLocation(time.UTC)}, opts...)...)
	listener := gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) { r.outcomes <- outcome{lockErr: err} })
	if _, err := r.l.NewJob(r.s, def, name, func(ctx context.Context) error {
		o := outcome{ran: true, ctx: ctx}
		o.tick, _ = gocronlock.Tick(ctx)
		if l, ok := core.FromContext(ctx); ok {
			o.fence = l.Fence()
		}
		if work != nil {
			o.err = work(ctx)
		}
		r.outcomes <- o
		return o.err
	}, gocron.WithEventListeners(listener)); err != nil {
		t.Fatal(err)
	}
	r.s.Start()
	return r
}

// fire moves the replica's clock to at, once the scheduler has armed its timer, and returns the
// outcome of the firing.
func (r *fakeReplica) fire(t *testing.T, at time.Time) outcome {
	t.Helper()
	r.advance(t, at)
	return r.next(t)
}

// advance moves the clock to at once the scheduler has armed its next timer.
func (r *fakeReplica) advance(t *testing.T, at time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the scheduler armed no timer: %v", err)
	}
	r.clock.Advance(at.Sub(r.clock.Now()))
}

// next returns the next outcome.
func (r *fakeReplica) next(t *testing.T) outcome {
	t.Helper()
	select {
	case o := <-r.outcomes:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome within 10s")
		return outcome{}
	}
}
