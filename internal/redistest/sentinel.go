package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a master, its replica and a Redis Sentinel monitoring them, started for one test.
type Sentinel struct {
	name     string
	master   *Server
	replica  *Server
	addr     string
	cmd      *exec.Cmd
	done     chan struct{}
	dir      string
	sentinel *redis.SentinelClient
}

// StartSentinel starts a master, a replica of it and one Sentinel (quorum 1) that monitors them
// under the name "lockkit", and waits until the Sentinel knows the replica. Everything is stopped
// when the test ends.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	srvs := StartN(t, 2)
	s := &Sentinel{name: "lockkit", master: srvs[0], replica: srvs[1], dir: t.TempDir(), done: make(chan struct{})}
	s.replica.Do(t, "REPLICAOF", "127.0.0.1", strconv.Itoa(s.master.Port()))
	waitFor(t, 20*time.Second, "replica in sync", func() bool {
		info, _ := s.replica.Do(t, "INFO", "replication").(string)
		return strings.Contains(info, "master_link_status:up")
	})
	bin, _ := binaries(t)
	ports, err := pickPorts(1, false)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
		"sentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %s 1000\n"+
		"sentinel failover-timeout %s 3000\n",
		ports[0], s.dir, filepath.Join(s.dir, "sentinel.log"), s.name, s.master.Port(), s.name, s.name)
	confPath := filepath.Join(s.dir, "sentinel.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, confPath, "--sentinel")
	s.cmd.Dir = s.dir
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("redistest: start sentinel: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	s.sentinel = redis.NewSentinelClient(&redis.Options{Addr: s.addr, DisableIdentity: true})
	t.Cleanup(func() {
		_ = s.sentinel.Close()
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	waitFor(t, 30*time.Second, "sentinel to know the replica", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		reps, err := s.sentinel.Replicas(ctx, s.name).Result()
		if err != nil || len(reps) != 1 || strings.Contains(fmt.Sprint(reps[0]["flags"]), "down") {
			return false
		}
		// A replica the Sentinel has not had INFO from yet is no candidate for promotion.
		refresh, _ := strconv.Atoi(fmt.Sprint(reps[0]["info-refresh"]))
		return fmt.Sprint(reps[0]["master-link-status"]) == "ok" && refresh < 5000
	})
	return s
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: timed out after %v waiting for %s", d, what)
		}
		time.Sleep(pollInterval)
	}
}

// MasterName returns the name the Sentinel monitors.
func (s *Sentinel) MasterName() string { return s.name }

// Addr returns the Sentinel's address.
func (s *Sentinel) Addr() string { return s.addr }

// Servers returns the servers that started as master and as replica.
func (s *Sentinel) Servers() (master, replica *Server) { return s.master, s.replica }

// MasterAddr asks the Sentinel for the current master's address.
func (s *Sentinel) MasterAddr(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a, err := s.sentinel.GetMasterAddrByName(ctx, s.name).Result()
	if err != nil {
		t.Fatalf("redistest: sentinel master addr: %v", err)
	}
	return net.JoinHostPort(a[0], a[1])
}

// FailoverOptions returns options for redis.NewFailoverClient.
func (s *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: s.name, SentinelAddrs: []string{s.addr}, DisableIdentity: true}
}

// Client returns a Sentinel-backed failover client, closed when the test ends.
func (s *Sentinel) Client(t testing.TB) *redis.Client {
	c := redis.NewFailoverClient(s.FailoverOptions())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Failover makes the Sentinel promote the replica (SENTINEL FAILOVER) and waits until it reports
// the new master and the new master has taken the role.
func (s *Sentinel) Failover(t testing.TB) {
	t.Helper()
	old := s.MasterAddr(t)
	var err error
	// NOGOODSLAVE: the Sentinel's view of the replica is not fresh enough yet; it refreshes it.
	waitFor(t, 20*time.Second, "sentinel to accept the failover", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = s.sentinel.Failover(ctx, s.name).Err()
		return err == nil || !strings.Contains(err.Error(), "NOGOODSLAVE")
	})
	if err != nil {
		t.Fatalf("redistest: sentinel failover: %v", err)
	}
	waitFor(t, 30*time.Second, "sentinel failover", func() bool {
		if s.MasterAddr(t) == old {
			return false
		}
		info, _ := s.replica.Do(t, "INFO", "replication").(string)
		return strings.Contains(info, "role:master")
	})
}
