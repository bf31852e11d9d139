package core_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// What no caller is told is logged (issue #29): a lost lock, the first failed renewal of a run, a
// release that failed after Do's function failed.
func TestLogger_whatNoCallerIsTold(t *testing.T) {
	srv, rdb, _ := setup(t)
	var out locktest.SyncBuffer
	c := locktest.NewClient(t, srv.Client(t), core.WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "logged", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, locktest.Key("logged"))
	<-l.Context().Done()
	locktest.Eventually(t, 2*time.Second, "the loss logged", func() bool {
		return strings.Contains(out.String(), `msg="lockkit: lock lost" name=logged reason=not_owner`)
	})
	failure := errors.New("the function failed")
	err = c.Do(ctx, "do", time.Second, func(context.Context) error {
		srv.Stop(t) // the release that follows cannot reach Redis
		return failure
	})
	if !errors.Is(err, failure) {
		t.Fatalf("Do: %v", err)
	}
	if !strings.Contains(out.String(), `msg="lockkit: release failed after the function returned an error" name=do`) {
		t.Fatalf("log:\n%s\nwant the failed release after the function's error", out.String())
	}
	if n := strings.Count(out.String(), "level=WARN"); n < 2 {
		t.Fatalf("%d warnings:\n%s", n, out.String())
	}
}

// A renewal that fails is logged once per run of failures, not once per retry.
func TestLogger_renewalFailureLoggedOnce(t *testing.T) {
	srv, _, _ := setup(t)
	var out locktest.SyncBuffer
	rdb := srv.Client(t)
	failing := &failRenewals{}
	rdb.AddHook(failing)
	c := locktest.NewClient(t, rdb, core.WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
	l, err := c.Acquire(context.Background(), "renewed", 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	failing.on.Store(true) // every renewal fails at once, and is tried again until the validity deadline
	<-l.Context().Done()
	locktest.Eventually(t, 2*time.Second, "the loss logged", func() bool { return strings.Contains(out.String(), "reason=expired") })
	if n, tries := strings.Count(out.String(), "renewal failed"), failing.n.Load(); n != 1 || tries < 3 {
		t.Fatalf("%d renewal attempts failed, logged %d times:\n%s", tries, n, out.String())
	}
}
