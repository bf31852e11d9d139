package main_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// A read-write lock in ls, inspect (text and JSON) and release --force: two readers and a writer
// queued behind them; then a writer and a reader queued.
func TestCLI_readWrite(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	billing := locktest.NewClient(t, rdb, core.WithLabel("billing"))
	reports := locktest.NewClient(t, rdb)

	r1 := acquire(t, billing, ctx, "catalog", core.Read())
	r2, err := reports.Acquire(ctx, "catalog", time.Minute, core.Read()) // the later lease: listed second
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	waited := make(chan *core.Lock, 1)
	go func() {
		w, _ := reports.Acquire(wctx, "catalog", time.Minute, core.Write())
		waited <- w
	}()
	locktest.Eventually(t, 5*time.Second, "a writer queued", func() bool {
		info, err := billing.Inspect(ctx, "catalog")
		return err == nil && info.RWQueued == 1
	})
	s := newSession(t, bin, "REDIS_URL=redis://"+srv.Addr())
	s.mask(srv.Addr(), "ADDR")
	s.maskLock(r1, "reader1")
	s.maskLock(r2, "reader2")
	s.run("", "ls")
	s.run("", "inspect", "catalog")
	s.run("", "inspect", "--json", "catalog")
	s.run("", "release", "--force", "--yes", "catalog")
	var w *core.Lock
	select {
	case w = <-waited: // woken by the force release
	case <-time.After(5 * time.Second):
	}
	if w == nil {
		t.Fatal("the queued writer did not get the lock after the force release")
	}
	s.maskLock(w, "writer")
	s.run("", "ls", "--json", "catalog")
	s.run("", "inspect", "catalog")
	_ = w.Release(ctx)
	s.run("", "inspect", "catalog")
	s.golden("rw")
}
