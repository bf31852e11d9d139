package main_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/exactlyonce"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// The commands against one redis-server, through REDIS_URL: ls, inspect (text and JSON, held,
// re-entered, with a fair waiter, free; a semaphore's permits), release (refused, declined, confirmed, not held), idem,
// and the usage and connection errors.
func TestCLI_single(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	billing := locktest.NewClient(t, rdb, core.WithLabel("billing"))
	reports := locktest.NewClient(t, rdb)
	waiter := locktest.NewClient(t, rdb)

	inv := acquire(t, billing, ctx, "invoice:42", core.Fair())
	acquire(t, billing, inv.Context(), "invoice:42")                          // re-entered: 2 holds
	daily, err := reports.Acquire(ctx, "report:daily", 1500*time.Millisecond) // renewed every 500ms
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(wctx, "invoice:42", time.Second, core.Fair())
		waited <- err
	}()
	// A semaphore of 3 permits, 2 held (the second with the later lease, so listed second).
	pool1 := acquire(t, billing, ctx, "pool", core.Permits(3))
	pool2, err := reports.Acquire(ctx, "pool", time.Minute, core.Permits(3))
	if err != nil {
		t.Fatal(err)
	}
	job := acquire(t, reports, ctx, "job", core.InNamespace("cron")) // listed as @cron/job
	locktest.Eventually(t, 5*time.Second, "a fair waiter", func() bool {
		info, err := billing.Inspect(ctx, "invoice:42")
		return err == nil && info.Queued == 1
	})

	s := newSession(t, bin, "REDIS_URL=redis://"+srv.Addr())
	s.mask(srv.Addr(), "ADDR")
	s.maskLock(inv, "invoice")
	s.maskLock(daily, "daily")
	s.maskLock(pool1, "pool1")
	s.maskLock(pool2, "pool2")
	s.maskLock(job, "job")
	s.run("", "ls")
	s.run("", "--url", srv.Addr(), "ls", "invoice:*") // flags before the command; host:port
	s.run("", "ls", "--json", "report:*")
	s.run("", "inspect", "invoice:42")
	s.run("", "inspect", "invoice:42", "--json")
	s.run("", "inspect", "nobody:holds:this")
	s.run("", "inspect", "pool")
	s.run("", "ls", "--json", "pool")
	s.run("", "release", "report:daily")
	s.run("n\n", "release", "--force", "report:daily")
	if daily.Context().Err() != nil {
		t.Fatal("a declined release released the lock")
	}
	s.run("y\n", "release", "--force", "report:daily")
	select {
	case <-daily.Context().Done():
	case <-time.After(time.Second): // one renewal interval (500ms), and some slack
		t.Fatal("the force-released holder's context was not cancelled")
	}
	if cause := context.Cause(daily.Context()); !errors.Is(cause, core.ErrLost) || !strings.Contains(cause.Error(), "not_owner") {
		t.Fatalf("holder's cause: %v", cause)
	}
	s.run("", "release", "--force", "--yes", "report:daily")
	s.run("", "release", "--force", "--yes", "pool")
	s.run("", "ls", "pool") // the holders learn it at their next renewal (core's tests)

	// A record of the exactly-once layer (as httpmw stores one), addressed by namespace and hash.
	s.run("", "idem", "http-idem", "abc")
	rec := exactlyonce.Encode('h', sha256.Sum256([]byte("POST /orders")), []byte("201 created"))
	rdb.Set(ctx, "lockkit:idem:{@http-idem/abc}", rec, time.Hour)
	s.run("", "idem", "http-idem", "abc")
	s.run("", "idem", "--json", "--body", "http-idem", "abc")
	// Anything else is shown raw (a scope with '@' is taken as it is).
	rdb.HSet(ctx, "lockkit:idem:{@legacy/abc}", "status", "200", "body", "hello")
	rdb.PExpire(ctx, "lockkit:idem:{@legacy/abc}", time.Hour)
	s.run("", "idem", "--body", "@legacy", "abc")
	acquire(t, reports, ctx, "running", core.InNamespace("http-idem"))
	s.run("", "idem", "http-idem", "running")

	s.run("", "bogus")
	s.run("", "inspect", "--url", "redis://127.0.0.1:1", "x")
	s.run("", "ls", "--url", "redis://a:1", "--url", "redis://b:1")
	stopWaiting()
	<-waited
	s.golden("single")
}
