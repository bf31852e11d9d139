package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// cancelledCtx returns a context that has already ended, as a request's context does once its
// client has gone away, carrying a value (Release keeps the values, for tracing).
func cancelledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxMark{}, "request"))
	cancel()
	return ctx
}

type ctxMark struct{}

// TestRelease_cancelledContext_givesTheLockBack: `defer l.Release(r.Context())` after the client went
// away must free the lock at once, for every kind of hold, not leave it held for its TTL.
func TestRelease_cancelledContext_givesTheLockBack(t *testing.T) {
	cases := []struct {
		name string
		hold []core.AcquireOption // the hold released with the ended context
		next []core.AcquireOption // another client's TryAcquire, which the hold excludes
	}{
		{name: "lock"},
		{name: "fair", hold: []core.AcquireOption{core.Fair()}, next: []core.AcquireOption{core.Fair()}},
		{name: "read", hold: []core.AcquireOption{core.Read()}, next: []core.AcquireOption{core.Write()}},
		{name: "write", hold: []core.AcquireOption{core.Write()}, next: []core.AcquireOption{core.Read()}},
		{name: "permit", hold: []core.AcquireOption{core.Permits(1)}, next: []core.AcquireOption{core.Permits(1)}},
	}
	_, rdb, c := setup(t)
	other := locktest.NewClient(t, rdb)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "release-ctx-" + tc.name
			ctx := context.Background()
			l, err := c.Acquire(ctx, name, 10*time.Second, tc.hold...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.TryAcquire(ctx, name, time.Second, tc.next...); !errors.Is(err, core.ErrNotAcquired) {
				t.Fatalf("TryAcquire while held: %v, want ErrNotAcquired", err)
			}
			if err := l.Release(cancelledCtx()); err != nil {
				t.Fatalf("Release with an ended context: %v", err)
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, core.ErrReleased) {
				t.Fatalf("lock context cause %v, want ErrReleased", cause)
			}
			n, err := other.TryAcquire(ctx, name, time.Second, tc.next...)
			if err != nil {
				t.Fatalf("TryAcquire right after the release: %v (the hold was left for its TTL)", err)
			}
			if err := n.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(cancelledCtx()); err != nil {
				t.Fatalf("second Release: %v, want nil (idempotent)", err)
			}
		})
	}
}

// TestReleaseSet_cancelledContext_writesAndReleases: ReleaseSet with an ended context still writes
// its value and frees the lock.
func TestReleaseSet_cancelledContext_writesAndReleases(t *testing.T) {
	_, rdb, c := setup(t)
	other := locktest.NewClient(t, rdb)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "release-set-ctx", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	key := "lockkit:done:{release-set-ctx}"
	if err := l.ReleaseSet(cancelledCtx(), key, []byte("ok"), time.Minute); err != nil {
		t.Fatalf("ReleaseSet with an ended context: %v", err)
	}
	if v, err := rdb.Get(ctx, key).Result(); err != nil || v != "ok" {
		t.Fatalf("guard key = %q, %v; want \"ok\"", v, err)
	}
	n, err := other.TryAcquire(ctx, "release-set-ctx", time.Second)
	if err != nil {
		t.Fatalf("TryAcquire right after the release: %v", err)
	}
	_ = n.Release(ctx)
}

// TestLockSetRelease_cancelledContext_givesTheLocksBack: the same for a set.
func TestLockSetRelease_cancelledContext_givesTheLocksBack(t *testing.T) {
	_, rdb, c := setup(t)
	other := locktest.NewClient(t, rdb)
	ctx := context.Background()
	names := []string{"set-ctx-a", "set-ctx-b", "{set-ctx}c"}
	s, err := c.AcquireAll(ctx, names, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(cancelledCtx()); err != nil {
		t.Fatalf("LockSet.Release with an ended context: %v", err)
	}
	for _, l := range s.Locks() {
		if cause := context.Cause(l.Context()); !errors.Is(cause, core.ErrReleased) {
			t.Fatalf("%s: cause %v, want ErrReleased", l.Name(), cause)
		}
	}
	n, err := other.TryAcquireAll(ctx, names, time.Second)
	if err != nil {
		t.Fatalf("TryAcquireAll right after the release: %v (the set was left for its TTL)", err)
	}
	if err := n.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRelease_keepsContextValues: the release is sent with the caller's values (so that a go-redis
// tracing hook nests its span under the request's), but not with its cancellation.
func TestRelease_keepsContextValues(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	rec := &ctxRecorder{}
	rdb.AddHook(rec)
	c := locktest.NewClient(t, rdb)
	l, err := c.Acquire(context.Background(), "release-values", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(cancelledCtx()); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.marked == 0 || rec.ended != 0 { // (EVALSHA, then EVAL on the script's first use)
		t.Fatalf("commands sent with the caller's value: %d (%d with an ended context), want some (0)", rec.marked, rec.ended)
	}
}

// ctxRecorder is a go-redis hook that counts the commands sent with ctxMark's value.
type ctxRecorder struct {
	mu            sync.Mutex
	marked, ended int
}

func (r *ctxRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *ctxRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.note(ctx)
		return next(ctx, cmd)
	}
}

func (r *ctxRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.note(ctx)
		return next(ctx, cmds)
	}
}

func (r *ctxRecorder) note(ctx context.Context) {
	if ctx.Value(ctxMark{}) == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marked++
	if ctx.Err() != nil {
		r.ended++
	}
}
