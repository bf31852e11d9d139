package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// installHint says how to get the PostgreSQL server binaries.
	installHint = "install them with `sudo apt-get install -y postgresql` (Debian/Ubuntu)"
	// startTimeout bounds initdb plus the server's start.
	startTimeout = 60 * time.Second
	// stopTimeout is how long Stop waits after SIGINT (fast shutdown) before SIGKILL.
	stopTimeout = 10 * time.Second
)

// Server is a private PostgreSQL server started for one test.
type Server struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{} // closed when the server process has exited
}

// Binaries returns the directory holding initdb and postgres: the one of initdb on PATH, else the
// newest /usr/lib/postgresql/*/bin (Debian's layout, which does not put them on PATH).
func Binaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("pgtest: initdb and postgres not found (neither on PATH nor in /usr/lib/postgresql/*/bin)")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Require checks that the PostgreSQL server binaries exist. If not, it calls t.Fatal when the CI
// environment variable is non-empty (CI must not silently skip), and t.Skip otherwise.
func Require(t testing.TB) string {
	t.Helper()
	dir, err := Binaries()
	if err == nil {
		return dir
	}
	msg := err.Error() + "; this test needs a real PostgreSQL server: " + installHint
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Start creates a database cluster in a fresh temporary directory (initdb, trust authentication
// on loopback only), starts postgres on a free 127.0.0.1 port and waits until it accepts
// connections. The server is stopped and its directory removed when the test ends.
//
// PostgreSQL refuses to run as root: when the test runs as root, initdb and postgres run as the
// "postgres" user if it exists, else as "nobody", and the directory is given to that user.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Require(t)
	cred, err := credential()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatalf("pgtest: chown %s: %v", dir, err)
		}
	}
	s := &Server{dir: dir, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", s.dataDir(), "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	initdb.Env = env()
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	if err := s.start(ctx, bin, cred); err != nil {
		t.Fatalf("pgtest: %v\n%s", err, s.logTail())
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("pgtest: postgres log:\n%s", s.logTail())
		}
	})
	return s
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logPath() string { return filepath.Join(s.dir, "postgres.log") }

// start runs postgres on a free port, retrying with another port if it loses a race for one.
func (s *Server) start(ctx context.Context, bin string, cred *syscall.Credential) error {
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return err
		}
		log, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", s.dataDir(), "-p", strconv.Itoa(port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "shared_buffers=16MB", "-c", "max_connections=40")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
		cmd.Env = env()
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Start()
		_ = log.Close()
		if err != nil {
			return fmt.Errorf("start postgres: %w", err)
		}
		s.port, s.cmd, s.done = port, cmd, make(chan struct{})
		go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
		if lastErr = s.waitReady(ctx); lastErr == nil {
			return nil
		}
		s.stop()
		if ctx.Err() != nil {
			break
		}
	}
	return lastErr
}

// waitReady polls until the server accepts a connection, exits or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := pgx.Connect(cctx, s.DSN())
		cancel()
		if err == nil {
			return c.Close(ctx)
		}
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited while starting: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready within %v: %w", startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop shuts the server down (fast shutdown), killing it if it does not exit in time.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// DSN returns the connection string of the server's "postgres" database as user postgres.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Connect opens a connection to the server, closed when the test ends.
func (s *Server) Connect(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

// credential returns the user to run PostgreSQL as when the test runs as root, else nil.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil && uid != 0 {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
		}
	}
	return nil, errors.New("running as root and neither user postgres nor nobody exists; PostgreSQL refuses to run as root")
}

// env is a minimal environment for the PostgreSQL binaries (no PG* variables of the caller).
func env() []string {
	return []string{"PATH=/usr/bin:/bin", "LANG=C", "LC_ALL=C", "TZ=UTC"}
}

// freePort returns a TCP port on 127.0.0.1 that was free when checked.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
