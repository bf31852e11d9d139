package core_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// wantInvalid fails t unless err matches ErrInvalid and its text names the argument (want).
func wantInvalid(t *testing.T, call string, err error, want string) {
	t.Helper()
	if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s = %v, want ErrInvalid naming %q", call, err, want)
	}
}

// TestInvalid_acquireArguments: an argument out of range — of an option, or of the call — makes
// Acquire, TryAcquire and Do fail with ErrInvalid naming it, before anything is sent, instead of
// being read as something else (Permits(0) as the lock, WithWait(0) as no limit, WithOwner("") as
// a fresh acquisition) or panicking (a nil fn, a nil option).
func TestInvalid_acquireArguments(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	counter := &scriptCounter{}
	rdb.AddHook(counter)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	cases := []struct {
		name string
		ttl  time.Duration
		opt  core.AcquireOption
		want string
	}{
		{"p0", time.Second, core.Permits(0), "core.Permits: n must be 1..MaxPermits (100000), got 0"},
		{"p-1", time.Second, core.Permits(-1), "core.Permits"},
		{"pmax", time.Second, core.Permits(core.MaxPermits + 1), "core.Permits"},
		{"pmin", time.Second, core.Permits(math.MinInt), "core.Permits"},
		{"w0", time.Second, core.WithWait(0), "core.WithWait: d must be positive, got 0s"},
		{"w-1", time.Second, core.WithWait(-time.Second), "core.WithWait"},
		{"o0", time.Second, core.WithOwner(""), "core.WithOwner: token must be 1 to 128 bytes, got 0"},
		{"o129", time.Second, core.WithOwner(strings.Repeat("o", 129)), "core.WithOwner"},
		{"onul", time.Second, core.WithOwner("a\x00b"), "core.WithOwner: token must not contain a NUL byte"},
		{"t0", time.Second, core.WithToken(""), "core.WithToken"},
		{"t129", time.Second, core.WithToken(strings.Repeat("t", 129)), "core.WithToken"},
		{"tnul", time.Second, core.WithToken("\x00"), "core.WithToken"},
		{"tmark", time.Second, core.WithToken("\x01rw"), "core.WithToken: token must not start with a control byte"},
		{"g0", time.Second, core.WithGuard(""), "core.WithGuard: key is empty"},
		{"mh", time.Second, core.WithMaxHold(-time.Millisecond), "core.WithMaxHold: d must not be negative"},
		{"nilopt", time.Second, nil, "AcquireOption 0 is nil"},
		{"ns", time.Second, core.InNamespace(""), "namespace"},
		{"ttl0", 0, core.Fair(), "ttl must be MinTTL..MaxTTL"},
		{"ttl-", -time.Second, core.Fair(), "ttl"},
		{"ttl25h", 25 * time.Hour, core.Fair(), "ttl"},
		{"", time.Second, core.Fair(), "name is empty"},
	}
	for _, tc := range cases {
		before := counter.n.Load()
		opts := []core.AcquireOption{tc.opt}
		// (A bounded context and a release: an argument wrongly accepted fails the case, and the
		// next call does not wait for it.)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		l, err := c.Acquire(cctx, tc.name, tc.ttl, opts...)
		wantInvalid(t, "Acquire("+tc.name+")", err, tc.want)
		_ = l.Release(ctx)
		l, err = c.TryAcquire(cctx, tc.name, tc.ttl, opts...)
		wantInvalid(t, "TryAcquire("+tc.name+")", err, tc.want)
		_ = l.Release(ctx)
		err = c.Do(cctx, tc.name, tc.ttl, func(context.Context) error {
			t.Errorf("Do(%s) ran fn", tc.name)
			return nil
		}, opts...)
		wantInvalid(t, "Do("+tc.name+")", err, tc.want)
		cancel()
		if n := counter.n.Load() - before; n != 0 {
			t.Errorf("%s: %d commands sent for an invalid argument", tc.name, n)
		}
	}
	// An out-of-range option is refused even when a later one would override it: it is a mistake.
	_, err := c.TryAcquire(ctx, "p-last", time.Second, core.Permits(0), core.Permits(2))
	wantInvalid(t, "TryAcquire(Permits(0), Permits(2))", err, "core.Permits")
}

// TestInvalid_callArguments: a nil fn, a nil context, a set's bad names or options.
func TestInvalid_callArguments(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	counter := &scriptCounter{}
	rdb.AddHook(counter)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	var noCtx context.Context // (a nil context, without a lint finding for a literal nil)

	wantInvalid(t, "Do(nil fn)", c.Do(ctx, "k", time.Second, nil), "core.Do: fn is nil")
	wantInvalid(t, "DoAll(nil fn)", c.DoAll(ctx, []string{"a"}, time.Second, nil), "core.DoAll: fn is nil")
	_, err := c.Acquire(noCtx, "k", time.Second)
	wantInvalid(t, "Acquire(nil ctx)", err, "ctx is nil")
	_, err = c.TryAcquireAll(noCtx, []string{"a"}, time.Second)
	wantInvalid(t, "TryAcquireAll(nil ctx)", err, "ctx is nil")
	for _, tc := range []struct {
		names []string
		opt   core.AcquireOption
		want  string
	}{
		{[]string{"a"}, core.Permits(0), "core.Permits"}, // once read as "no Permits": the set was taken
		{[]string{"a"}, core.WithWait(0), "core.WithWait"},
		{[]string{"a"}, core.WithMaxHold(-1), "core.WithMaxHold"},
		{[]string{"a"}, nil, "AcquireOption 0 is nil"},
		{nil, core.WithMaxHold(time.Minute), "names: a set takes 1 to 100 names, got 0"},
		{[]string{"a", "a"}, core.WithMaxHold(time.Minute), "names: name 1 appears twice"},
		{[]string{"a", ""}, core.InNamespace("x"), "name"},
	} {
		_, err := c.TryAcquireAll(ctx, tc.names, time.Second, tc.opt)
		wantInvalid(t, "TryAcquireAll", err, tc.want)
	}
	if n := counter.n.Load(); n != 0 {
		t.Errorf("%d commands sent for invalid arguments", n)
	}

	l, err := c.Acquire(ctx, "held", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantInvalid(t, "Extend(nil ctx)", l.Extend(noCtx, time.Second), "ctx is nil")
	_, err = l.TTL(noCtx)
	wantInvalid(t, "TTL(nil ctx)", err, "ctx is nil")
	wantInvalid(t, "Extend(5ms)", l.Extend(ctx, 5*time.Millisecond), "ttl")
	wantInvalid(t, "ReleaseSet(ttl 0)", l.ReleaseSet(ctx, "x:{held}", nil, 0), "core.Lock.ReleaseSet: ttl")
	wantInvalid(t, "ReleaseSet(key)", l.ReleaseSet(ctx, "x:{other}", nil, time.Second), "core.Lock.ReleaseSet: key")
	wantInvalid(t, "Release(nil ctx)", l.Release(noCtx), "ctx is nil")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.AcquireAll(ctx, []string{"s1", "s2"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantInvalid(t, "LockSet.Release(nil ctx)", s.Release(noCtx), "ctx is nil")
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A nil context holds no lock; Close refuses it and the Client stays open; a nil Client's
	// Close is an error, not a panic.
	if l, ok := core.FromContext(noCtx); l != nil || ok {
		t.Errorf("FromContext(nil) = %v, %v", l, ok)
	}
	if s, ok := core.SetFromContext(noCtx); s != nil || ok {
		t.Errorf("SetFromContext(nil) = %v, %v", s, ok)
	}
	wantInvalid(t, "Close(nil ctx)", c.Close(noCtx), "ctx is nil")
	if l, err := c.TryAcquire(ctx, "after", time.Second); err != nil {
		t.Fatalf("after Close(nil): %v, want the Client still open", err)
	} else {
		_ = l.Release(ctx)
	}
	var none *core.Client
	wantInvalid(t, "nil Client's Close", none.Close(ctx), "nil *Client")
	var typedNil *redis.Client
	_, err = core.NewRedlock([]redis.UniversalClient{rdb, typedNil, rdb})
	wantInvalid(t, "NewRedlock(typed nil node)", err, "redlock node 1 is nil")
}

// TestInvalid_clientOptions: New refuses each out-of-range option, naming it.
func TestInvalid_clientOptions(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	cases := []struct {
		opt  core.Option
		want string
	}{
		{core.WithPrefix("a{b"), "core.WithPrefix"},
		{core.WithRenewRatio(0), "core.WithRenewRatio: r must be 0.05..0.8, got 0"},
		{core.WithRenewRatio(0.9), "core.WithRenewRatio"},
		{core.WithRenewRatio(math.NaN()), "core.WithRenewRatio"},
		{core.WithRetryBackoff(0, time.Second), "core.WithRetryBackoff"},
		{core.WithRetryBackoff(2*time.Second, time.Second), "core.WithRetryBackoff"},
		{core.WithFairWaiterTimeout(0), "core.WithFairWaiterTimeout"},
		{core.WithDriftFactor(0), "core.WithDriftFactor"},
		{core.WithDriftFactor(0.6), "core.WithDriftFactor"},
		{core.WithNodeTimeout(-time.Second), "core.WithNodeTimeout"},
		{core.WithReplicaAck(-1, time.Second), "core.WithReplicaAck: n"},
		{core.WithReplicaAck(1, 0), "core.WithReplicaAck: timeout"},
		{core.WithDefaultMaxHold(-time.Second), "core.WithDefaultMaxHold"},
		{core.WithPipelining(-1), "core.WithPipelining"},
		{core.WithLabel(strings.Repeat("l", 129)), "core.WithLabel"},
		{nil, "Option 0 is nil"},
	}
	for i, tc := range cases {
		c, err := core.New(rdb, tc.opt)
		wantInvalid(t, "New(case "+string(rune('a'+i))+")", err, tc.want)
		if c != nil {
			_ = c.Close(context.Background())
		}
		if tc.opt != nil {
			_, err = core.NewRedlock([]redis.UniversalClient{rdb}, tc.opt)
			wantInvalid(t, "NewRedlock(case "+string(rune('a'+i))+")", err, tc.want)
		}
	}
	_, err := core.New(nil)
	wantInvalid(t, "New(nil)", err, "core.New: rdb is nil")
	var unset *redis.Client
	_, err = core.New(unset)
	wantInvalid(t, "New((*redis.Client)(nil))", err, "core.New: rdb is nil")
}
