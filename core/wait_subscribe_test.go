package core_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// stalledSubscriptions returns a go-redis client to srv whose connections dialed after stall() go
// through a proxy that holds every reply back for an hour, so a subscription it opens then is
// never confirmed; the client's first connection is dialed (and pooled) before it returns, so
// its commands are answered at once.
func stalledSubscriptions(t *testing.T, srv *redistest.Server) (rdb *redis.Client, stall func()) {
	t.Helper()
	slow := srv.StartDelayProxy(t, time.Hour)
	var stalled atomic.Bool
	o := srv.Options()
	o.ReadTimeout = 250 * time.Millisecond // (Close waits for the stalled subscription's reply)
	// Two commands' connections dialled (and initialised) before the stall: the Client's eviction
	// check sends INFO beside its first acquisition, and neither may need a connection dialled
	// through the stall.
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if stalled.Load() {
			addr = slow.Addr()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	rdb = redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	locktest.WarmConns(t, rdb, 2)
	return rdb, func() { stalled.Store(true) }
}

// A waiting Acquire keeps its WithWait limit when the limit passes while the call waits for its
// release channel's subscription to be confirmed. (That wait took the limit's only tick: the call
// then waited, unbounded, until it got the lock or its context ended.)
func TestWait_limitKeptWhileSubscribing(t *testing.T) {
	srv := redistest.Start(t)
	holder := locktest.NewClient(t, srv.Client(t))
	rdb, stall := stalledSubscriptions(t, srv)
	// A fallback backoff far longer than the limit: the wait for the subscription, which lasts at
	// most the backoff, outlasts the limit.
	waiter := locktest.NewClient(t, rdb, core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	stall()
	const limit = 200 * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, 8*time.Second) // (so that a failure does not hang)
	defer cancel()
	start := time.Now()
	_, err = waiter.Acquire(cctx, "k", time.Second, core.WithWait(limit))
	took := time.Since(start)
	var nae *core.NotAcquiredError
	if !errors.Is(err, core.ErrNotAcquired) || !errors.As(err, &nae) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with WithWait(%v) while subscribing: %v after %v, want the limit's NotAcquiredError", limit, err, took)
	}
	if took > limit+500*time.Millisecond {
		t.Fatalf("Acquire with WithWait(%v) returned after %v while its subscription was not confirmed", limit, took)
	}
}

// The same for AcquireAll: its wait for the subscription was bounded by the backoff only.
func TestWait_setLimitKeptWhileSubscribing(t *testing.T) {
	srv := redistest.Start(t)
	holder := locktest.NewClient(t, srv.Client(t))
	rdb, stall := stalledSubscriptions(t, srv)
	waiter := locktest.NewClient(t, rdb, core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "b", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	stall()
	const limit = 200 * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	start := time.Now()
	_, err = waiter.AcquireAll(cctx, []string{"a", "b"}, time.Second, core.WithWait(limit))
	took := time.Since(start)
	if !errors.Is(err, core.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcquireAll with WithWait(%v) while subscribing: %v after %v, want the limit's error", limit, err, took)
	}
	if took > limit+500*time.Millisecond {
		t.Fatalf("AcquireAll with WithWait(%v) returned after %v while its subscription was not confirmed", limit, took)
	}
}
