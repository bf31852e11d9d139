package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// A permit acquisition replayed by go-redis (its first reply was lost) answers the same permit and
// takes no second one; a replayed release answers "released" even after other permits of the
// name were taken and given back in between.
func TestPermits_replayedAcquireAndRelease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	replay := &replayHook{}
	rdbA := srv.Client(t)
	rdbA.AddHook(replay)
	a := locktest.NewClient(t, rdbA)
	b := locktest.NewClient(t, rdb)
	ctx := context.Background()
	warm, err := a.Acquire(ctx, "rp", 5*time.Second, core.Permits(2)) // load the scripts
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Release(ctx)
	// With one permit left to take, a replay that did not recognise its own permit would answer
	// "all taken".
	other, err := b.TryAcquire(ctx, "rp", 5*time.Second, core.Permits(2))
	if err != nil {
		t.Fatal(err)
	}
	replay.arm(func() {})
	p, err := a.TryAcquire(ctx, "rp", 5*time.Second, core.Permits(2))
	if err != nil {
		t.Fatalf("replayed acquisition: %v", err)
	}
	_ = other.Release(ctx)
	if !replay.fired() {
		t.Fatal("the acquisition was not replayed")
	}
	if n := rdb.ZCard(ctx, locktest.Key("rp", "permits")).Val(); n != 1 {
		t.Fatalf("%d permits held after a replayed acquisition, want 1", n)
	}
	replay.arm(func() { // between the release and its replay, B takes and gives back a permit
		q, err := b.TryAcquire(ctx, "rp", 5*time.Second, core.Permits(2))
		if err != nil {
			t.Errorf("B: %v", err)
			return
		}
		if err := q.Release(ctx); err != nil {
			t.Errorf("B release: %v", err)
		}
	})
	if err := p.Release(ctx); err != nil {
		t.Fatalf("replayed release: %v", err)
	}
	if !replay.fired() {
		t.Fatal("the release was not replayed")
	}
}

// A permit acquisition whose reply is lost after the script ran is given back, not left taken by
// nobody for its TTL.
func TestPermits_lostAcquireReply_givesThePermitBack(t *testing.T) {
	srv := redistest.Start(t)
	lose := &loseReplyHook{}
	lossy := srv.Client(t)
	lossy.AddHook(lose)
	a := locktest.NewClient(t, lossy)
	b := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	lose.armed.Store(true)
	if _, err := a.Acquire(ctx, "lr", time.Minute, core.Permits(1)); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("acquire with a lost reply: %v", err)
	}
	if !lose.ran.Load() {
		t.Fatal("the script did not run: the test proves nothing")
	}
	p, err := b.Acquire(ctx, "lr", time.Second, core.Permits(1), core.WithWait(2*time.Second))
	if err != nil {
		t.Fatalf("the permit stayed orphaned: %v", err)
	}
	_ = p.Release(ctx)
}
