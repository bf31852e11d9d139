package core_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redisinfo"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// evicting are the settings of a managed Redis: a memory limit and the volatile-lru policy.
var evicting = redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru")

// logged returns a Client over rdb whose log goes to out, checking for masters it has not checked
// every 20 ms, and takes a lock with it (the check starts with the first acquisition).
func logged(t *testing.T, out *locktest.SyncBuffer, c *core.Client, err error) *core.Client {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	core.SetEvictionEvery(c, 20*time.Millisecond)
	l, err := c.Acquire(context.Background(), "evict-check", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(context.Background())
	return c
}

func textLog(out *locktest.SyncBuffer) core.Option {
	return core.WithLogger(slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

// infoCalls returns how many INFO commands srv ran.
func infoCalls(t *testing.T, srv *redistest.Server) int64 { return srv.CommandStats(t)["info"] }

// waitRounds waits until srv answered more INFO commands (the check went round again).
func waitRounds(t *testing.T, srv *redistest.Server) {
	n := infoCalls(t, srv)
	locktest.Eventually(t, 5*time.Second, "the eviction check asking again", func() bool { return infoCalls(t, srv) >= n+2 })
}

// warning is the line the check logs for a master that may evict.
func warning(node string) string {
	return fmt.Sprintf(`level=WARN msg="lockkit: Redis may evict lock keys: a lock whose key is evicted is lost, and another caller can take it before its holder learns it" node=%s maxmemory-policy=volatile-lru maxmemory=104857600 fix=`, node)
}

// A server with a memory limit and a volatile policy gets one warning, naming it, the policy and
// the fix; rounds that follow say nothing more. Servers that do not evict get none.
func TestEviction_warnsOncePerMaster(t *testing.T) {
	srv := redistest.Start(t, evicting)
	var out locktest.SyncBuffer
	c, err := core.New(srv.Client(t), textLog(&out))
	logged(t, &out, c, err)
	locktest.Eventually(t, 5*time.Second, "the warning", func() bool { return strings.Contains(out.String(), warning(srv.Addr())) })
	waitRounds(t, srv)
	if n := strings.Count(out.String(), "level=WARN"); n != 1 || !strings.Contains(out.String(), redisinfo.FixAnchor) {
		t.Fatalf("%d warnings, want 1 naming %s:\n%s", n, redisinfo.FixAnchor, out.String())
	}

	for _, args := range [][]string{{"--maxmemory", "100mb", "--maxmemory-policy", "noeviction"}, {"--maxmemory-policy", "volatile-lru"}} {
		safe := redistest.Start(t, redistest.WithArgs(args...))
		var quiet locktest.SyncBuffer
		c, err := core.New(safe.Client(t), textLog(&quiet))
		logged(t, &quiet, c, err)
		waitRounds(t, safe)
		if quiet.String() != "" {
			t.Errorf("%v: logged\n%s", args, quiet.String())
		}
	}
}

// Each Redlock node is checked: one warning per node that evicts.
func TestEviction_warnsPerRedlockNode(t *testing.T) {
	nodes := append(redistest.StartN(t, 2, evicting), redistest.Start(t))
	var (
		out  locktest.SyncBuffer
		rdbs []redis.UniversalClient
	)
	for _, n := range nodes {
		rdbs = append(rdbs, n.Client(t))
	}
	c, err := core.NewRedlock(rdbs, textLog(&out))
	logged(t, &out, c, err)
	for _, n := range nodes[:2] {
		locktest.Eventually(t, 5*time.Second, "a warning for "+n.Addr(), func() bool { return strings.Contains(out.String(), warning(n.Addr())) })
	}
	waitRounds(t, nodes[2])
	if n := strings.Count(out.String(), "level=WARN"); n != 2 {
		t.Fatalf("%d warnings, want 2:\n%s", n, out.String())
	}
}

// A server that denies INFO (the service's ACL of docs/security.md) is said once at Info level,
// never as an error or a warning, and not asked again.
func TestEviction_deniedSaidOnce(t *testing.T) {
	line := locktest.ACLUsers(locktest.Doc(t, "docs/security.md"))["lockkit"]
	if line == "" || strings.Contains(line, "+info") {
		t.Fatalf("docs/security.md: the lockkit user's line %q: want one, without +info", line)
	}
	srv := redistest.Start(t, redistest.WithACL(line), evicting)
	var out locktest.SyncBuffer
	c, err := core.New(srv.Client(t), textLog(&out))
	c = logged(t, &out, c, err)
	locktest.Eventually(t, 5*time.Second, "the skipped check said", func() bool { return strings.Contains(out.String(), "eviction check skipped") })
	for i := range 5 {
		l, err := c.Acquire(context.Background(), fmt.Sprint("more-", i), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(context.Background())
	}
	if n := len(srv.Do(t, "ACL", "LOG").([]any)); n != 1 {
		t.Errorf("ACL LOG has %d entries, want the one INFO", n)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "time=") || !strings.Contains(lines[0], "level=INFO") {
		t.Fatalf("logged:\n%s\nwant one INFO line", out.String())
	}
}

// After a Sentinel failover the check reaches the new master, and warns if it evicts.
func TestEviction_newSentinelMaster(t *testing.T) {
	s := redistest.StartSentinel(t)
	_, replica := s.Servers()
	replica.Do(t, "CONFIG", "SET", "maxmemory", "100mb")
	replica.Do(t, "CONFIG", "SET", "maxmemory-policy", "volatile-lru")
	var out locktest.SyncBuffer
	rdb := redis.NewFailoverClient(s.FailoverOptions())
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := core.New(rdb, textLog(&out))
	logged(t, &out, c, err)
	s.Failover(t)
	want := fmt.Sprintf("node=\"the Sentinel master (port %d)\" maxmemory-policy=volatile-lru", replica.Port())
	locktest.Eventually(t, 10*time.Second, "the new master's warning", func() bool { return strings.Contains(out.String(), want) })
	if n := strings.Count(out.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, out.String())
	}
}
