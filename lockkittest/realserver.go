package lockkittest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// errNoRedisServer is StartServer's error in FIPS 140-only mode without a redis-server on PATH.
var errNoRedisServer = errors.New("lockkittest: GODEBUG=fips140=only: the embedded Redis (miniredis) " +
	"names scripts by their SHA-1, which FIPS 140-only mode forbids, and no redis-server is on PATH " +
	"to start instead: install redis-server (Redis 7.0 or later), or run without fips140=only")

// realServer is a redis-server process, what StartServer starts in FIPS 140-only mode.
type realServer struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// startRealServer starts redis-server on a free loopback port, without persistence, and waits
// until it answers (a few tries: another process may take the port first).
func startRealServer() (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedisServer
	}
	var last error
	for range 3 {
		var s *Server
		if s, last = tryRealServer(bin); last == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("lockkittest: GODEBUG=fips140=only: start %s instead of the embedded Redis: %w", bin, last)
}

func tryRealServer(bin string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &realServer{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		err := rdb.Ping(ctx).Err()
		if err == nil {
			return &Server{proc: p, addr: addr}, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("redis-server on port %s exited: %s", port, strconv.Quote(err.Error()))
		case <-ctx.Done():
			p.close()
			return nil, fmt.Errorf("redis-server on port %s: no answer: %w", port, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// close stops the process and waits for it.
func (p *realServer) close() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
