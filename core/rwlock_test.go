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

// rwKeys are the keys of the read-write lock "doc" (docs/keys.md).
var rwKeys = []string{locktest.Key("doc", "rw"), locktest.Key("doc", "rw", "limits"), locktest.Key("doc", "rw", "fences"), locktest.Key("doc")}

// Readers share, a writer excludes readers and writers; fences increase across both sides; every
// key has a TTL and the lease keys go when the last hold is released.
func TestRW_readersShare_writerExcludes(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	var last int64
	fresh := func(l *core.Lock, mode string) {
		t.Helper()
		if l.Fence() <= last || l.Mode() != mode || l.Holds() != 1 || l.Holds() > 1 || l.Limit() != 0 ||
			l.Key() != locktest.Key("doc", "rw") || l.Name() != "doc" {
			t.Fatalf("%s hold: fence %d (last %d) mode %q holds %d limit %d key %q", mode, l.Fence(), last, l.Mode(),
				l.Holds(), l.Limit(), l.Key())
		}
		last = l.Fence()
	}
	r1, err := c.TryAcquire(ctx, "doc", 5*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	fresh(r1, "read")
	r2, err := c.TryAcquire(ctx, "doc", 5*time.Second, core.Read())
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	fresh(r2, "read")
	var na *core.NotAcquiredError
	if _, err := c.TryAcquire(ctx, "doc", 5*time.Second, core.Write()); !errors.As(err, &na) || na.RetryAfter <= 4*time.Second {
		t.Fatalf("a writer while two read: %v, want NotAcquiredError with the readers' TTL", err)
	}
	for _, k := range rwKeys {
		if d := rdb.PTTL(ctx, k).Val(); d <= 0 {
			t.Fatalf("%s: PTTL %v, want a TTL", k, d)
		}
	}
	_ = r1.Release(ctx)
	if _, err := c.TryAcquire(ctx, "doc", 5*time.Second, core.Write()); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a writer while one reads: %v", err)
	}
	_ = r2.Release(ctx)
	w, err := c.TryAcquire(ctx, "doc", 5*time.Second, core.Write())
	if err != nil {
		t.Fatal(err)
	}
	fresh(w, "write")
	for _, opt := range []core.AcquireOption{core.Read(), core.Write()} {
		if _, err := c.TryAcquire(ctx, "doc", 5*time.Second, opt); !errors.Is(err, core.ErrNotAcquired) {
			t.Fatalf("while a writer holds: %v", err)
		}
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, rwKeys[:3]...).Val(); n != 0 {
		t.Fatalf("%d lease keys left after the last release", n)
	}
	r3, err := c.TryAcquire(ctx, "doc", 5*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	fresh(r3, "read")
	_ = r3.Release(ctx)
}

// What is refused before anything is sent.
func TestRW_invalidCombinations(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	for name, opts := range map[string][]core.AcquireOption{
		"both":    {core.Read(), core.Write()},
		"permits": {core.Write(), core.Permits(2)},
		"owner":   {core.Read(), core.WithOwner("tok")},
		"token":   {core.Write(), core.WithToken("tok")},
		"guard":   {core.Write(), core.WithGuard("lockkit:x:{doc}")},
	} {
		if _, err := c.TryAcquire(ctx, "doc", time.Second, opts...); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	r, err := c.TryAcquire(ctx, "doc", time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	if err := r.ReleaseSet(ctx, "lockkit:x:{doc}", []byte("v"), time.Second); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("ReleaseSet on a read hold: %v, want ErrInvalid", err)
	}
}

// Over Redlock a read-write lock is refused with ErrInvalid, whatever the side, before anything is
// sent.
func TestRW_redlockRefused(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	c := redlockClient(t, srvs)
	ctx := context.Background()
	for _, opt := range []core.AcquireOption{core.Read(), core.Write()} {
		if _, err := c.TryAcquire(ctx, "doc", time.Second, opt); !errors.Is(err, core.ErrInvalid) {
			t.Fatalf("over Redlock: %v, want ErrInvalid", err)
		}
		if err := c.Do(ctx, "doc", time.Second, func(context.Context) error { return nil }, opt); !errors.Is(err, core.ErrInvalid) {
			t.Fatalf("Do over Redlock: %v, want ErrInvalid", err)
		}
	}
	for _, s := range srvs {
		if n := s.Do(t, "DBSIZE"); n != int64(0) {
			t.Fatalf("%s: %v keys written", s.Addr(), n)
		}
	}
}
