package lockkittest

import (
	"crypto/fips140"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// Server is an embedded Redis (miniredis) on a loopback port; in FIPS 140-only mode, a
// redis-server process instead (see StartServer).
type Server struct {
	mr   *miniredis.Miniredis
	proc *realServer // in FIPS 140-only mode, instead of mr
	addr string
}

// StartServer starts an embedded Redis on a free loopback port, for a program that should run
// without a Redis to install (a demo, an example, a local tool); close it when done. Tests use
// NewServer, which closes it when the test ends.
//
// TTLs count down with the wall clock (miniredis's ClockTTL: every command first ages the keys by
// the time elapsed), which lockkit's watchdog relies on: it renews with PEXPIRE and reads PTTL, so
// a lock nobody renews expires on time, as on a real Redis. The server models one Redis server
// only; see the package documentation for what it does not model.
//
// lockkit sends its read-only scripts (Inspect, Lock.TTL) with EVALSHA_RO. miniredis refuses TIME
// in them (Redis allows it: TIME writes nothing), so they run as EVALSHA here; the embedded server
// checks nothing about permissions anyway.
//
// In FIPS 140-only mode (GODEBUG=fips140=only; crypto/fips140.Enforced) miniredis cannot run a
// script: it names scripts by their SHA-1, in this process, which that mode forbids (it panics).
// StartServer then starts a redis-server process from PATH instead, on a free loopback port,
// without persistence (Miniredis returns nil), and fails with an error saying so when there is
// none.
func StartServer() (*Server, error) {
	if fips140.Enforced() {
		return startRealServer()
	}
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true)
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	srv := mr.Server()
	srv.SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		switch cmd {
		case "EVALSHA_RO", "EVAL_RO":
			srv.Dispatch(c, append([]string{cmd[:len(cmd)-3]}, args...))
			return true
		}
		return false
	})
	return &Server{mr: mr, addr: mr.Addr()}, nil
}

// NewServer starts an embedded Redis on a free loopback port, as StartServer does, and closes it
// when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := StartServer()
	if err != nil {
		t.Fatalf("lockkittest: start embedded redis: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Close stops the server and closes its connections.
func (s *Server) Close() {
	if s.proc != nil {
		s.proc.close()
		return
	}
	s.mr.Close()
}

// Addr returns the server's host:port (also after Close).
func (s *Server) Addr() string { return s.addr }

// Miniredis returns the embedded server itself, to inspect keys, make a lock expire with
// FastForward, or make commands fail with SetError; nil in FIPS 140-only mode, where the server is
// a redis-server process (StartServer).
func (s *Server) Miniredis() *miniredis.Miniredis { return s.mr }

// Redis returns a new go-redis client of the server, closed when the test ends. It does not send
// CLIENT SETINFO, which the embedded server does not know.
func (s *Server) Redis(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, DisableIdentity: true})
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
