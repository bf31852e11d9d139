package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// misconfigured checks that err is a configuration error, not an outage: it matches
// ErrMisconfigured and not ErrUnavailable, its ErrorType says so, and its message has want.
func misconfigured(t *testing.T, what string, err error, reason, want string) {
	t.Helper()
	var me *core.MisconfiguredError
	var et interface{ ErrorType() string }
	switch {
	case !errors.Is(err, core.ErrMisconfigured) || errors.Is(err, core.ErrUnavailable):
		t.Fatalf("%s: %v, want ErrMisconfigured and not ErrUnavailable", what, err)
	case !errors.As(err, &et) || et.ErrorType() != "misconfigured":
		t.Fatalf("%s: %v: ErrorType not misconfigured", what, err)
	case reason != "" && (!errors.As(err, &me) || me.Reason != reason):
		t.Fatalf("%s: %v, want a *MisconfiguredError for %s", what, err, reason)
	case !strings.Contains(err.Error(), want):
		t.Fatalf("%s: %v, want the server's message (%s)", what, err, want)
	}
}

// A wrong password is a configuration error, not an outage: Acquire fails at once, after one
// attempt, without waiting out its wait limit, and the error does not show the password.
func TestMisconfigured_wrongPassword(t *testing.T) {
	srv := redistest.Start(t, redistest.WithPassword("right-pw"))
	o := srv.Options()
	o.Password = "wrong-pw"
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	var attempts int
	c := locktest.NewClient(t, rdb, core.WithHook(core.Hook{WaitDone: func(_ context.Context, w core.WaitInfo) { attempts = w.Attempts }}))
	ctx := context.Background()
	_, err := c.TryAcquire(ctx, "x", time.Second)
	misconfigured(t, "TryAcquire", err, "credentials", "WRONGPASS")
	start := time.Now()
	_, err = c.Acquire(ctx, "x", time.Second, core.WithWait(10*time.Second))
	misconfigured(t, "Acquire", err, "credentials", "WRONGPASS")
	if took := time.Since(start); took > 5*time.Second || attempts != 1 {
		t.Fatalf("Acquire failed after %v and %d attempts, want at once", took, attempts)
	}
	if strings.Contains(err.Error(), "-pw") {
		t.Fatalf("the error shows a password: %v", err)
	}
}

// An ACL user missing a grant gets a configuration error naming it: a command lockkit sends
// (EVALSHA), or one a script runs (PEXPIRE, for Extend).
func TestMisconfigured_missingGrant(t *testing.T) {
	srv := redistest.Start(t, redistest.WithACL("user app on >pw ~* &* +@all -evalsha", "user ext on >pw ~* &* +@all -pexpire"))
	ctx := context.Background()
	c := locktest.NewClient(t, srv.Client(t))
	_, err := c.TryAcquire(ctx, "x", time.Second)
	misconfigured(t, "without EVALSHA", err, "permission", "'evalsha'")

	o := srv.Options()
	o.Username = "ext"
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	c = locktest.NewClient(t, rdb)
	l, err := c.TryAcquire(ctx, "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	misconfigured(t, "Extend without PEXPIRE", l.Extend(ctx, time.Second), "permission", "script")
}

// A command renamed away on the server is a configuration error.
func TestMisconfigured_renamedCommand(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--rename-command", "EVALSHA", ""))
	_, err := locktest.NewClient(t, srv.Client(t)).TryAcquire(context.Background(), "x", time.Second)
	misconfigured(t, "EVALSHA renamed away", err, "command", "unknown command 'evalsha'")
	if strings.Contains(err.Error(), "lockkit:{x}") {
		t.Fatalf("the error repeats the command's arguments (the owner token): %v", err)
	}
}

// Over Redlock, refusals that leave no quorum are a configuration error; one refusing node among
// three leaves a quorum, and the lock is taken.
func TestMisconfigured_redlock(t *testing.T) {
	srvs := redistest.StartN(t, 3, redistest.WithPassword("right-pw"))
	nodes := func(wrong int) []redis.UniversalClient {
		var out []redis.UniversalClient
		for i, s := range srvs {
			o := s.Options()
			if i < wrong {
				o.Password = "wrong-pw"
			}
			rdb := redis.NewClient(o)
			t.Cleanup(func() { _ = rdb.Close() })
			out = append(out, rdb)
		}
		return out
	}
	ctx := context.Background()
	c, err := core.NewRedlock(nodes(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx) })
	_, err = c.Acquire(ctx, "x", time.Second, core.WithWait(10*time.Second))
	misconfigured(t, "Redlock, two nodes of three refusing", err, "", "WRONGPASS")
	var q *core.QuorumError
	if !errors.As(err, &q) || q.Refused != 2 {
		t.Fatalf("%v: want a *QuorumError with 2 refusals", err)
	}
	c1, err := core.NewRedlock(nodes(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c1.Close(ctx) })
	if _, err := c1.TryAcquire(ctx, "y", 20*time.Second); err != nil {
		t.Fatalf("Redlock, one node of three refusing: %v", err)
	}
}
