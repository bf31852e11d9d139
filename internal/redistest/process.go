package redistest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startTimeout bounds how long a server may take to answer PING.
	startTimeout = 15 * time.Second
	// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	stopTimeout = 5 * time.Second
	// pollInterval is the pause between two readiness checks.
	pollInterval = 20 * time.Millisecond
	// startAttempts bounds the retries when a port turns out to be taken.
	startAttempts = 5
)

// constError is an error that can be a constant, so that the package has no
// mutable state.
type constError string

// Error returns the message.
func (e constError) Error() string { return string(e) }

// errPortInUse marks a start that failed because the port was taken.
const errPortInUse = constError("port already in use")

// args returns the redis-server command line.
func (s *Server) args() []string {
	port := strconv.Itoa(s.port)
	a := []string{
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--logfile", s.LogPath(),
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		"--repl-diskless-sync-delay", "0",
	}
	if s.certs != nil {
		a = append(a,
			"--port", "0",
			"--tls-port", port,
			"--tls-cert-file", s.certs.certFile,
			"--tls-key-file", s.certs.keyFile,
			"--tls-ca-cert-file", s.certs.caFile,
			"--tls-auth-clients", "no",
			"--tls-replication", "yes",
		)
		if s.cluster {
			a = append(a, "--tls-cluster", "yes")
		}
	} else {
		a = append(a, "--port", port)
	}
	switch {
	case len(s.cfg.acl) > 0:
		a = append(a, "--aclfile", s.aclPath())
	case s.cfg.password != "":
		a = append(a, "--requirepass", s.cfg.password)
	}
	if s.adminPass != "" {
		// Lets replicas (cluster replicas, or REPLICAOF in a test)
		// authenticate to their master.
		a = append(a, "--masterauth", s.adminPass)
		if s.adminUser != "" {
			a = append(a, "--masteruser", s.adminUser)
		}
	}
	if s.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "1000",
			"--cluster-replica-validity-factor", "0",
		)
	}
	if s.cfg.persist {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	}
	return append(a, s.cfg.args...)
}

// startFresh starts the server for the first time on port, retrying on new
// ports if the port turns out to be taken.
func (s *Server) startFresh(port int) error {
	for attempt := 1; ; attempt++ {
		s.port = port
		err := s.launch()
		if err == nil || !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return err
		}
		ports, perr := pickPorts(1, s.cluster)
		if perr != nil {
			return errors.Join(err, perr)
		}
		port = ports[0]
	}
}

// launch starts redis-server and waits until it answers PING. On failure the
// process is killed and the error holds the tail of its output.
func (s *Server) launch() error {
	logStart := fileSize(s.LogPath())
	stdioStart := fileSize(s.stdioPath())
	stdio, err := os.OpenFile(s.stdioPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = stdio, stdio
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	_ = stdio.Close()
	if err != nil {
		return fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc, s.paused = p, false
	s.mu.Unlock()

	err = s.waitReady(p)
	if err == nil {
		return nil
	}
	_ = cmd.Process.Kill()
	<-p.done
	s.mu.Lock()
	s.proc = nil
	s.mu.Unlock()
	out := s.logTail(logStart, 30) + s.tail(s.stdioPath(), stdioStart, 30)
	if strings.Contains(out, "Address already in use") {
		err = fmt.Errorf("%w: %w", err, errPortInUse)
	}
	return fmt.Errorf("redistest: redis-server on port %d: %w\n--- last lines of %s and %s ---\n%s",
		s.port, err, s.LogPath(), s.stdioPath(), out)
}

// waitReady polls PING until it succeeds, the process exits or startTimeout
// passes.
func (s *Server) waitReady(p *process) error {
	o := s.AdminOptions()
	o.MaxRetries = -1
	o.PoolSize = 1
	o.DialTimeout = 500 * time.Millisecond
	o.ContextTimeoutEnabled = true
	c := redis.NewClient(o)
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		lastErr = c.Ping(ctx).Err()
		cancel()
		if lastErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %v (last error: %v)", startTimeout, lastErr)
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited during startup (%v)", p.err)
		case <-time.After(pollInterval):
		}
	}
}

// current returns the running process, or nil.
func (s *Server) current() (*process, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc, s.paused
}

// halt stops the server: gracefully (SIGTERM, then SIGKILL after stopTimeout)
// or with SIGKILL. It does nothing if the server is not running.
func (s *Server) halt(graceful bool) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	return s.haltLocked(graceful)
}

// haltLocked is halt for a caller holding opMu.
func (s *Server) haltLocked(graceful bool) error {
	p, paused := s.current()
	if p == nil {
		return nil
	}
	if !p.exited() {
		if graceful {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			if paused {
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
			}
			timer := time.NewTimer(stopTimeout)
			select {
			case <-p.done:
			case <-timer.C:
			}
			timer.Stop()
		}
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			return fmt.Errorf("redis-server (pid %d) did not exit after SIGKILL", p.cmd.Process.Pid)
		}
	}
	s.mu.Lock()
	s.proc, s.paused = nil, false
	s.mu.Unlock()
	return nil
}

// Stop stops the server with SIGTERM, and SIGKILL if it has not exited after
// 5 s. A paused server is resumed so that it can shut down. Stopping a
// stopped server does nothing.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.halt(true); err != nil {
		t.Fatalf("redistest: stop %s: %v", s.Addr(), err)
	}
}

// Kill kills the server with SIGKILL and waits for it to exit, simulating a
// crash. Killing a stopped server does nothing.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if err := s.halt(false); err != nil {
		t.Fatalf("redistest: kill %s: %v", s.Addr(), err)
	}
}

// Restart stops the server if it is running, and starts it again on the same
// port with the same configuration and no data (any RDB or AOF file left in
// its directory, e.g. by a replica's full sync, is removed first). A cluster
// node keeps its cluster config file, so it rejoins the cluster with the same
// node ID. It waits until the server answers PING.
// With WithPersistence the data is kept (the append-only file is replayed).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if err := s.haltLocked(true); err != nil {
		t.Fatalf("redistest: restart %s: %v", s.Addr(), err)
	}
	for _, name := range []string{"dump.rdb", "appendonly.aof", "appendonlydir"} {
		if s.cfg.persist && name != "dump.rdb" {
			continue // WithPersistence: come back with the data
		}
		if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
			t.Fatalf("redistest: restart %s: %v", s.Addr(), err)
		}
	}
	// The port may still be held briefly by a client connection's socket.
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.launch()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			t.Fatalf("redistest: restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pause stops the server process with SIGSTOP: it keeps its connections and
// the kernel still accepts new ones, but it answers nothing until Resume.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGSTOP, true)
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGCONT, false)
}

// signal sends sig to the running server and records whether it is paused.
func (s *Server) signal(t testing.TB, sig syscall.Signal, paused bool) {
	t.Helper()
	s.opMu.Lock()
	defer s.opMu.Unlock()
	p, _ := s.current()
	if p == nil || p.exited() {
		t.Fatalf("redistest: %v %s: server is not running", sig, s.Addr())
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("redistest: %v %s: %v", sig, s.Addr(), err)
	}
	s.mu.Lock()
	s.paused = paused
	s.mu.Unlock()
}

// Running reports whether the server process is running (a paused server is
// running).
func (s *Server) Running() bool {
	p, _ := s.current()
	return p != nil && !p.exited()
}

// Paused reports whether the server is running but paused by Pause.
func (s *Server) Paused() bool {
	p, paused := s.current()
	return paused && p != nil && !p.exited()
}

// logTail returns the last n lines of the server log written after offset.
func (s *Server) logTail(offset int64, n int) string {
	return s.tail(s.LogPath(), offset, n)
}

// tail returns the last n lines of the file at path written after offset.
func (s *Server) tail(path string, offset int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	data, _ := io.ReadAll(f)
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// fileSize returns the size of the file at path, or 0.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
