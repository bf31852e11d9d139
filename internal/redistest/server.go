package redistest

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process started for one test. Its methods may be
// called from several goroutines, but the ones taking a testing.TB report
// errors with t.Fatal and so belong on the test's goroutine.
type Server struct {
	bin     string
	dir     string
	cfg     *config
	certs   *tlsMaterial
	cluster bool

	adminUser, adminPass   string
	clientUser, clientPass string

	// port is chosen while the server is first started and fixed afterwards.
	port int
	// nodeID is the cluster node ID, set by StartCluster.
	nodeID string

	opMu        sync.Mutex // serialises Stop, Kill, Restart, Pause and Resume
	mu          sync.Mutex // guards proc and paused
	proc        *process
	paused      bool
	cleanupOnce sync.Once
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been waited for
	err  error         // result of cmd.Wait, set before done is closed
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start starts a fresh redis-server on a free 127.0.0.1 port and waits until
// it answers PING. The server is stopped when the test ends. It calls Require
// first, so the test is skipped (or fails on CI) without redis-server.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	Require(t)
	return startServers(t, 1, newConfig(opts), false)[0]
}

// StartN starts n independent servers in parallel, e.g. for Redlock tests. Each
// has its own port and data; they all share the options.
func StartN(t testing.TB, n int, opts ...Option) []*Server {
	t.Helper()
	Require(t)
	if n < 1 {
		t.Fatalf("redistest: StartN: n must be at least 1, got %d", n)
	}
	return startServers(t, n, newConfig(opts), false)
}

// startServers starts n servers in parallel (cluster nodes if cluster is set)
// and registers their cleanup.
func startServers(t testing.TB, n int, cfg *config, cluster bool) []*Server {
	t.Helper()
	bin, _ := binaries(t)
	var mat *tlsMaterial
	if cfg.useTLS {
		requireTLS(t, bin)
		var err error
		if mat, err = newTLSMaterial(t.TempDir()); err != nil {
			t.Fatalf("redistest: generate TLS certificates: %v", err)
		}
	}
	ports, err := pickPorts(n, cluster)
	if err != nil {
		t.Fatal(err)
	}
	// One admin password for all servers, so that cluster nodes and
	// redis-cli can authenticate to each other.
	adminPass := rand.Text()
	servers := make([]*Server, n)
	for i := range servers {
		s, err := newServer(bin, t.TempDir(), cfg, mat, cluster, adminPass)
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = s
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { errs[i] = s.startFresh(ports[i]) })
	}
	wg.Wait()
	for _, s := range servers {
		t.Cleanup(func() { s.cleanup(t) })
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return servers
}

// newServer prepares a server in dir, writing its aclfile if needed. With
// WithACL, adminPass becomes the password of the admin user.
func newServer(bin, dir string, cfg *config, mat *tlsMaterial, cluster bool, adminPass string) (*Server, error) {
	s := &Server{bin: bin, dir: dir, cfg: cfg, certs: mat, cluster: cluster}
	s.clientUser, s.clientPass = cfg.clientCredentials()
	switch {
	case len(cfg.acl) > 0:
		s.adminUser, s.adminPass = adminUserName, adminPass
		data := strings.Join(cfg.aclLines(s.adminPass), "\n") + "\n"
		if err := os.WriteFile(s.aclPath(), []byte(data), 0o600); err != nil {
			return nil, fmt.Errorf("redistest: write aclfile: %w", err)
		}
	case cfg.password != "":
		s.adminPass = cfg.password
	}
	return s, nil
}

// cleanup logs the tail of the server log if the test failed, and stops the
// server. It does its work once, however often it is called.
func (s *Server) cleanup(t testing.TB) {
	s.cleanupOnce.Do(func() {
		if t.Failed() && s.port != 0 {
			t.Logf("redistest: last lines of %s (server %s):\n%s", s.LogPath(), s.Addr(), s.logTail(0, 20))
		}
		if err := s.halt(true); err != nil {
			t.Errorf("redistest: stop %s: %v", s.Addr(), err)
		}
	})
}

// Addr returns the server's address, "127.0.0.1:port".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port returns the server's port (the TLS port with WithTLS).
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory, which holds its log, aclfile
// and cluster config file.
func (s *Server) Dir() string { return s.dir }

// LogPath returns the path of the server's log file.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "redis.log") }

// NodeID returns the cluster node ID of a server started by StartCluster, and
// "" for other servers.
func (s *Server) NodeID() string { return s.nodeID }

// stdioPath is where the server's standard output and error go; they hold
// errors that occur before the log file is opened.
func (s *Server) stdioPath() string { return filepath.Join(s.dir, "stdio.log") }

// aclPath is the path of the server's aclfile.
func (s *Server) aclPath() string { return filepath.Join(s.dir, "users.acl") }

// Options returns new client options for the server: its address, the
// credentials of WithPassword or WithACL if set, TLSConfig with WithTLS, and
// DisableIdentity (Redis 7.0 lacks CLIENT SETINFO). Callers may modify them.
func (s *Server) Options() *redis.Options {
	return s.options(s.clientUser, s.clientPass)
}

// AdminOptions is like Options, but authenticates with full privileges: as
// the default user with WithPassword, or as the "redistest-admin" ACL user
// with WithACL.
func (s *Server) AdminOptions() *redis.Options {
	return s.options(s.adminUser, s.adminPass)
}

// options returns client options with the given credentials.
func (s *Server) options(user, pass string) *redis.Options {
	return &redis.Options{
		Addr:            s.Addr(),
		Username:        user,
		Password:        pass,
		TLSConfig:       s.TLSConfig(),
		DisableIdentity: true,
	}
}

// Client returns a new client created from Options, closed when the test
// ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.Options())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TLSConfig returns a new client TLS configuration trusting the test CA, or
// nil if the server was not started with WithTLS.
func (s *Server) TLSConfig() *tls.Config {
	if s.certs == nil {
		return nil
	}
	return s.certs.clientConfig()
}
