package cronlock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/cronlock"
	"github.com/robfig/cron/v3"
)

// Every invalid argument is reported in one shape, "lockkit: cronlock: WHAT": "lockkit" once, the
// package once, matching ErrInvalid and core.ErrInvalid. (It used to read "lockkit: cronlock:
// lockkit: invalid argument: lockkit: cronlock: nil core.Client: lockkit: invalid argument".)
func TestErrors_oneShape(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv.Client(t))
	l := newLocker(t, c)
	noop := func(context.Context) error { return nil }
	errs := map[string]error{}
	_, errs["New(nil)"] = cronlock.New(nil)
	_, errs["WithTTL"] = cronlock.New(c, cronlock.WithTTL(time.Millisecond))
	_, errs["WithNamespace"] = cronlock.New(c, cronlock.WithNamespace("Cron/"))
	_, errs["WithClock"] = cronlock.New(c, cronlock.WithClock(nil))
	_, errs["WithMaxHold"] = cronlock.New(c, cronlock.WithMaxHold(-time.Second))
	_, errs["spec"] = l.Add(cron.New(), "* * *", "x", noop)
	_, errs["name"] = l.Add(cron.New(), "* * * * *", "a{b", noop)
	_, errs["nil cron"] = l.Add(nil, "* * * * *", "x", noop)
	for what, err := range errs {
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if !errors.Is(err, cronlock.ErrInvalid) || !errors.Is(err, core.ErrInvalid) ||
			!strings.HasPrefix(msg, "lockkit: cronlock: ") || strings.Count(msg, "lockkit") != 1 ||
			strings.Contains(msg, "invalid argument") {
			t.Errorf("%s: %q, want one shape: lockkit: cronlock: WHAT, matching ErrInvalid", what, msg)
		}
	}
	if msg := errs["WithTTL"].Error(); msg != "lockkit: cronlock: WithTTL(1ms) is outside [10ms, 24h0m0s]" {
		t.Errorf("WithTTL: %q", msg)
	}
	if ErrInvalid := cronlock.ErrInvalid.Error(); ErrInvalid != "lockkit: cronlock: invalid argument" {
		t.Errorf("ErrInvalid reads %q", ErrInvalid)
	}
}

// Without WithLogger a failure goes to slog.Default(), at Error; a run that went well is logged at
// Debug, below slog.Default()'s level; a discarding logger silences both.
func TestWithLogger_defaultsToSlogDefault(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv.Client(t))
	var logs locktest.SyncBuffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	boom := func(context.Context) error { return errors.New("boom") }
	fire(t, c, tick, "fails-quietly", boom, cronlock.WithLogger(slog.New(slog.DiscardHandler)))
	fire(t, c, tick, "runs", func(context.Context) error { return nil })
	if logs.String() != "" {
		t.Fatalf("logged at Info or above: %q", logs.String())
	}
	fire(t, c, tick, "fails", boom)
	if got := logs.String(); !strings.Contains(got, `level=ERROR msg="lockkit: cronlock: failed" job=fails`) {
		t.Fatalf("the failure was not logged to slog.Default(): %q", got)
	}
}
