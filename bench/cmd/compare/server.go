package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockkit/lockkit/bench/internal/serverinfo"
	"github.com/redis/go-redis/v9"
)

// server is one redis-server process on a free loopback port, with persistence off. It is
// killed with the harness (Pdeathsig) if the harness dies first.
type server struct {
	addr  string
	dir   string
	cmd   *exec.Cmd
	done  chan struct{}
	admin *redis.Client // the harness's own connection: FLUSHALL, CONFIG RESETSTAT, INFO
}

// startServers starts n redis-servers.
func startServers(bin string, n int) ([]*server, error) {
	var out []*server
	for range n {
		s, err := startServer(bin)
		if err != nil {
			stopServers(out)
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func stopServers(ss []*server) {
	for _, s := range ss {
		s.stop()
	}
}

// startServer launches redis-server and waits until it answers PING, retrying on another port
// when the chosen one was taken in the meantime.
func startServer(bin string) (*server, error) {
	var last error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := launch(bin, port)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func launch(bin string, port int) (*server, error) {
	dir, err := os.MkdirTemp("", "lockkit-bench-redis-")
	if err != nil {
		return nil, err
	}
	log := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--logfile", log,
		"--daemonize", "no", "--save", "", "--appendonly", "no", "--latency-monitor-threshold", "1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	s.admin = redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 1, MaxRetries: -1})
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = s.admin.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			b, _ := os.ReadFile(log)
			s.stop()
			return nil, fmt.Errorf("redis-server on port %d exited: %s", port, tail(string(b), 5))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on port %d: no answer to PING within 10s: %v", port, err)
		}
	}
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], "\n")
}

// stop terminates the server (SIGTERM, SIGKILL after 5 s) and removes its directory.
func (s *server) stop() {
	if s.admin != nil {
		_ = s.admin.Close()
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	_ = os.RemoveAll(s.dir)
}

// harnessCommand tells the commands sent by the harness (or by connection set-up, which pools finish before a
// measurement starts); they are left out of every count.
func harnessCommand(name string) bool {
	switch name {
	case "info", "config|resetstat", "flushall", "hello", "client|setinfo", "latency|reset", "latency|latest":
		return true
	}
	return false
}

// serverStats is a snapshot of the counters the harness reads after a measurement.
type serverStats struct {
	calls   map[string]int64 // INFO commandstats: calls per command, script-internal calls included
	cpuUsec int64            // used_cpu_sys + used_cpu_user since the server started, in µs
}

// commands returns the calls counted by the server, harness commands excluded.
func (st serverStats) commands() int64 {
	var n int64
	for k, v := range st.calls {
		if !harnessCommand(k) {
			n += v
		}
	}
	return n
}

// flush clears the keyspace between measurements.
func (s *server) flush(ctx context.Context) error { return s.admin.FlushAll(ctx).Err() }

// resetStats clears the command statistics. The CONFIG RESETSTAT call itself and the INFO that
// reads the stats are excluded from every count (see harnessCommand).
func (s *server) resetStats(ctx context.Context) error { return s.admin.ConfigResetStat(ctx).Err() }

// latencyReset clears the server's latency monitor (left out of every count, as LATENCY LATEST).
func (s *server) latencyReset(ctx context.Context) error {
	return s.admin.Do(ctx, "LATENCY", "RESET").Err()
}

// longestFast is the longest command of constant cost (GET, PING, PEXPIRE: the latency monitor's
// fast-command event) the server ran since its latency monitor was last reset, in ms; 0 when none
// took 1 ms (the threshold launch sets). Such a command is microseconds of work: a long one is
// the server kept off a CPU, not a command waiting for another.
func (s *server) longestFast(ctx context.Context) (float64, error) {
	v, err := s.admin.Do(ctx, "LATENCY", "LATEST").Slice()
	if err != nil {
		return 0, err
	}
	return fastMax(v)
}

// fastMax reads the fast-command event's all-time maximum (ms) from a LATENCY LATEST reply: one
// entry per event, [name, time of the latest, the latest ms, the maximum ms].
func fastMax(reply []any) (float64, error) {
	for _, e := range reply {
		f, ok := e.([]any)
		if !ok || len(f) < 4 {
			return 0, fmt.Errorf("LATENCY LATEST entry %v", e)
		}
		if name, _ := f[0].(string); name == "fast-command" {
			ms, ok := f[3].(int64)
			if !ok {
				return 0, fmt.Errorf("LATENCY LATEST entry %v", e)
			}
			return float64(ms), nil
		}
	}
	return 0, nil
}

func (s *server) stats(ctx context.Context) (serverStats, error) {
	txt, err := s.admin.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return serverStats{}, err
	}
	return parseInfo(txt)
}

// parseInfo reads cmdstat_* calls and the CPU counters from INFO output.
func parseInfo(txt string) (serverStats, error) {
	st := serverStats{calls: map[string]int64{}}
	for _, line := range strings.Split(txt, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			for _, f := range strings.Split(v, ",") {
				if n, ok := strings.CutPrefix(f, "calls="); ok {
					c, err := strconv.ParseInt(n, 10, 64)
					if err != nil {
						return st, fmt.Errorf("INFO %s: %w", k, err)
					}
					st.calls[strings.TrimPrefix(k, "cmdstat_")] = c
				}
			}
		}
	}
	if len(st.calls) == 0 {
		return st, errors.New("INFO: no commandstats")
	}
	cpu, err := serverinfo.CPUSeconds(txt)
	if err != nil {
		return st, err
	}
	st.cpuUsec = int64(cpu * 1e6)
	return st, nil
}
