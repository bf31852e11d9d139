package lockkittest_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lockkittest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { locktest.VerifyTestMain(m) }

func TestNewClient_runs_code_under_a_lock(t *testing.T) {
	locks := lockkittest.NewClient(t)
	if err := rebuildIndex(t.Context(), locks); err != nil {
		t.Fatal(err)
	}
	l, err := locks.Acquire(t.Context(), "index", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	again, err := locks.Acquire(l.Context(), "index", time.Minute) // reentrant with the lock's context
	if err != nil {
		t.Fatal(err)
	}
	if again.Holds() == 1 || again.Fence() != l.Fence() {
		t.Fatalf("reentry: reentrant %v fence %d, want true and %d", again.Holds() > 1, again.Fence(), l.Fence())
	}
	for _, h := range []*core.Lock{again, l} {
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// Fencing tokens increase across clients and acquisitions, and a waiter is woken by the release.
func TestServer_clients_contend(t *testing.T) {
	srv := lockkittest.NewServer(t)
	a, b := srv.Client(t), srv.Client(t)
	l, err := a.TryAcquire(t.Context(), "report", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(t.Context(), "report", time.Minute); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("second client: %v, want ErrNotAcquired", err)
	}
	got := make(chan *core.Lock, 1)
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w, err := b.Acquire(ctx, "report", time.Minute)
		if err != nil {
			errc <- err
			return
		}
		got <- w
	}()
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-got:
		if w.Fence() <= l.Fence() {
			t.Fatalf("fence %d after %d, want it to increase", w.Fence(), l.Fence())
		}
		if err := w.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	case err := <-errc:
		t.Fatalf("waiter: %v", err)
	}
}

// The server's TTLs count down: a lock whose TTL runs out is lost by its holder.
func TestServer_expired_lock_is_lost(t *testing.T) {
	srv := lockkittest.NewServer(t)
	c := srv.Client(t)
	l, err := c.Acquire(t.Context(), "report", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv.Miniredis().FastForward(time.Minute)
	select {
	case <-l.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lock was not lost after its TTL ran out")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, core.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", cause)
	}
	// Without FastForward the wall clock does it: a key with a short TTL is gone soon after.
	rdb := srv.Redis(t)
	if err := rdb.Set(t.Context(), "k", "v", 20*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "the key to expire", func() bool {
		n, err := rdb.Exists(t.Context(), "k").Result()
		return err == nil && n == 0
	})
}

// Everything NewClient made is closed when the test that made it ends.
func TestNewClient_cleanup(t *testing.T) {
	var (
		c    *core.Client
		addr string
	)
	t.Run("user", func(t *testing.T) {
		srv := lockkittest.NewServer(t)
		c, addr = srv.Client(t), srv.Addr()
		if _, err := c.Acquire(t.Context(), "held-at-end", time.Minute); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := c.TryAcquire(t.Context(), "x", time.Minute); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("client after its test: %v, want ErrClosed", err)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("the embedded server still listens after its test ended")
	}
}

// StartServer's server runs outside a test: TTLs count down on the wall clock, and Close stops it.
func TestStartServer_runs_until_closed(t *testing.T) {
	srv, err := lockkittest.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
	defer rdb.Close()
	if err := rdb.Set(t.Context(), "k", "v", 20*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "the key to expire", func() bool {
		n, err := rdb.Exists(t.Context(), "k").Result()
		return err == nil && n == 0
	})
	srv.Close()
	if conn, err := net.DialTimeout("tcp", srv.Addr(), time.Second); err == nil {
		conn.Close()
		t.Fatal("the server still listens after Close")
	}
}

// The embedded server runs the same scripts: one name, one lock holds there too (a read keeps a
// lock and permits out; a waiting lock gets the name once it is released, long before the read's
// TTL).
func TestNewClient_kindsOfHoldExcludeEachOther(t *testing.T) {
	locks := lockkittest.NewClient(t)
	ctx := t.Context()
	r, err := locks.TryAcquire(ctx, "catalog", time.Minute, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]core.AcquireOption{nil, {core.Write()}, {core.Permits(2)}} {
		if _, err := locks.TryAcquire(ctx, "catalog", time.Minute, opts...); !errors.Is(err, core.ErrNotAcquired) {
			t.Fatalf("%d options beside a read: %v, want ErrNotAcquired", len(opts), err)
		}
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		l, err := locks.Acquire(wctx, "catalog", time.Minute)
		if err == nil {
			if l.Fence() <= r.Fence() {
				err = errors.New("the lock's fence is not above the read's")
			}
			_ = l.Release(ctx)
		}
		got <- err
	}()
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
