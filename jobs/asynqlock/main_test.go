package asynqlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/jobs/asynqlock"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { locktest.VerifyTestMain(m) }

// newLocks returns a core.Client over rdb, closed when the test ends.
func newLocks(t testing.TB, rdb redis.UniversalClient, opts ...core.Option) *core.Client {
	return locktest.NewClient(t, rdb, opts...)
}

// newMiddleware returns the middleware over c or fails the test.
func newMiddleware(t testing.TB, c *core.Client, opts ...asynqlock.Option) asynq.MiddlewareFunc {
	t.Helper()
	mw, err := asynqlock.Middleware(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// errLog collects the errors asynq reports for failed task runs (Config.ErrorHandler).
type errLog struct {
	mu   sync.Mutex
	errs []error
	ch   chan error // gets every error, if not full
}

func newErrLog() *errLog { return &errLog{ch: make(chan error, 1024)} }

func (e *errLog) HandleError(_ context.Context, _ *asynq.Task, err error) {
	e.mu.Lock()
	e.errs = append(e.errs, err)
	e.mu.Unlock()
	select {
	case e.ch <- err:
	default:
	}
}

func (e *errLog) all() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// config is a server configuration for tests: quick polling, quiet logs, the helpers installed.
func config(concurrency int, errs *errLog) asynq.Config {
	return asynq.Config{
		Concurrency:              concurrency,
		TaskCheckInterval:        20 * time.Millisecond,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		ShutdownTimeout:          3 * time.Second,
		LogLevel:                 asynq.FatalLevel,
		ErrorHandler:             errs,
		IsFailure:                asynqlock.IsFailure(nil),
		// A fast back-off for real failures; busy keys use the suggested delay.
		RetryDelayFunc: asynqlock.RetryDelayFunc(func(int, error, *asynq.Task) time.Duration { return 10 * time.Millisecond }),
	}
}

// startServer runs an asynq server over rdb with mw in front of h, shut down when the test ends.
// Register the core.Client (newLocks) before calling it, so that the server stops first.
func startServer(t testing.TB, rdb redis.UniversalClient, cfg asynq.Config, mw asynq.MiddlewareFunc, h asynq.HandlerFunc) {
	t.Helper()
	srv := asynq.NewServerFromRedisClient(rdb, cfg)
	mux := asynq.NewServeMux()
	mux.Use(mw)
	mux.Handle("work", h)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
}

// newEnqueuer returns an asynq client over rdb.
func newEnqueuer(rdb redis.UniversalClient) *asynq.Client { return asynq.NewClientFromRedisClient(rdb) }

// newInspector returns an asynq inspector over rdb.
func newInspector(rdb redis.UniversalClient) *asynq.Inspector {
	return asynq.NewInspectorFromRedisClient(rdb)
}

// receive waits up to d for a value from ch.
func receive[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
		panic("unreachable")
	}
}

// redisClient returns a go-redis client for opt, closed when the test ends.
func redisClient(t testing.TB, opt *redis.Options) *redis.Client {
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
