// Package locktest holds the helpers lockkit's own tests share. It is for tests only.
package locktest

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// CloseTimeout bounds the Close of a client made by NewClient when the test ends.
const CloseTimeout = 2 * time.Second

// NewClient returns a core.Client over rdb, closed (releasing what it holds) when the test ends.
func NewClient(t testing.TB, rdb redis.UniversalClient, opts ...core.Option) *core.Client {
	t.Helper()
	// Quiet by default (tests lose locks on purpose); a test that checks the logs passes its own.
	opts = append([]core.Option{core.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	c, err := core.New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// Eventually polls cond every 2ms until it holds, and fails the test if d passes first. It is how
// tests wait for a state another goroutine or process reaches (never a bare sleep).
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// WarmConns leaves n connections of rdb's pool idle and ready: dialled and initialised. go-redis
// dials the connections of MinIdleConns in the background but initialises a connection (HELLO, a
// round trip) on its first use, so a test that needs commands to go out at once (through a slow
// proxy, or before a stall) warms them here: n sticky connections held at once, each pinged, then
// returned to the pool.
func WarmConns(t testing.TB, rdb *redis.Client, n int) {
	t.Helper()
	conns := make([]*redis.Conn, n)
	for i := range conns {
		conns[i] = rdb.Conn()
		if err := conns[i].Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, cn := range conns {
		if err := cn.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if idle := rdb.PoolStats().IdleConns; int(idle) < n {
		t.Fatalf("%d idle connections after warming %d", idle, n)
	}
}

// FreeAddr returns a loopback address that was free a moment ago, for a test server to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// Held reports whether somebody holds the lock whose key is key: the key holds a lock's value
// that starts with an owner token (a free lock's value starts with a byte 2, the previous
// version's with a NUL byte, see core/internal/script/lua/lock.lua).
func Held(t testing.TB, rdb redis.Cmdable, key string) bool {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v != "" && v[0] != 2 && v[0] != 0
}

// HeldBy reports whether token holds the lock whose key is key.
func HeldBy(t testing.TB, rdb redis.Cmdable, key, token string) bool {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return token != "" && len(v) > len(token) && v[:len(token)] == token && v[len(token)] == 0
}
