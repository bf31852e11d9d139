package lockkittest

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/embedredis"
	"github.com/lockkit/lockkit/internal/locktest"
)

// Server is an embedded Redis that lives as long as the test that started it.
type Server struct {
	mr *miniredis.Miniredis
}

// NewServer starts an embedded Redis on a free loopback port, with TTLs counting down on the wall
// clock, and closes it when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	mr, err := embedredis.Start()
	if err != nil {
		t.Fatalf("lockkittest: start embedded redis: %v", err)
	}
	t.Cleanup(mr.Close)
	return &Server{mr: mr}
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.mr.Addr() }

// Miniredis returns the embedded server itself, to inspect keys, make a lock expire with
// FastForward, or make commands fail with SetError.
func (s *Server) Miniredis() *miniredis.Miniredis { return s.mr }

// Redis returns a new go-redis client of the server, closed when the test ends. It does not send
// CLIENT SETINFO, which the embedded server does not know.
func (s *Server) Redis(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.mr.Addr(), DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Client returns a new lockkit client of the server, over its own go-redis client. When the test
// ends the client is closed (releasing the locks it still holds) before its go-redis client.
// Clients of one Server contend for the same locks, as separate processes would.
func (s *Server) Client(t testing.TB, opts ...core.Option) *core.Client {
	t.Helper()
	return locktest.NewClient(t, s.Redis(t), opts...)
}

// NewClient starts an embedded Redis for the test and returns a lockkit client of it; both are
// closed when the test ends. Use NewServer and Server.Client for several clients of one server.
func NewClient(t testing.TB, opts ...core.Option) *core.Client {
	t.Helper()
	return NewServer(t).Client(t, opts...)
}
