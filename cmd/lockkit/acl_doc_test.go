package main_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The operators' ACLs are read from docs/security.md, the one source.
const (
	opsUser    = "lockkit-ops"
	viewerUser = "lockkit-viewer"
)

// docACLs returns the `user` lines of docs/security.md for the operator and the read-only operator,
// and what each adds on a Redis Cluster.
func docACLs(t *testing.T) (lines, cluster map[string]string) {
	t.Helper()
	md := locktest.Doc(t, "docs/security.md")
	users := locktest.ACLUsers(md)
	lines, cluster = map[string]string{}, map[string]string{}
	for _, row := range locktest.TableRows(locktest.Section(t, md, "The `lockkit` command's ACL")) {
		if u, add := locktest.CodeSpans(row[0]), locktest.CodeSpans(row[len(row)-1]); len(u) == 1 && len(add) == 1 && users[u[0]] != "" {
			cluster[u[0]] = add[0]
		}
	}
	for _, u := range []string{opsUser, viewerUser} {
		lines[u] = users[u]
		if lines[u] == "" || cluster[u] == "" {
			t.Fatalf("docs/security.md lacks the `user %s` line or its cluster additions", u)
		}
	}
	return lines, cluster
}

// reading are the commands a read-only operator runs: every command but release --force.
var reading = [][]string{
	{"ls"}, {"ls", "--json"}, {"ls", "p"}, {"inspect", "a"}, {"inspect", "--json", "b"}, {"inspect", "p"},
	{"idem", "--body", "s", "k"}, {"idem", "--body", "s", "h"}, {"idem", "s", "none"}, {"watch", "--for", "300ms", "a"},
}

// releasing are the operator's forced releases, of a lock, a fair lock and a semaphore.
var releasing = [][]string{
	{"release", "--force", "--yes", "a"}, {"release", "--force", "--yes", "b"}, {"release", "--force", "--yes", "p"},
}

// busyState sets up, with full privileges, what the commands look at: lock "a"; fair lock "b" with a
// live waiter that refreshed its place; semaphore "p" with a permit held and a live waiter; a dead
// waiter (one whose process died while queued) at the head of both queues; an idempotency record
// of each type the command reads (a string and a hash). The waiters take what a forced release
// frees, or give up when the test ends.
func busyState(t *testing.T, admin redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	queued := map[int]int{} // failed attempts, by limit (0: the lock)
	c := locktest.NewClient(t, admin, core.WithFairWaiterTimeout(time.Second), core.WithHook(core.Hook{
		Attempt: func(_ context.Context, w core.WaitInfo) {
			if !w.Acquired && w.Err == nil {
				mu.Lock()
				queued[w.Limit]++
				mu.Unlock()
			}
		},
	}))
	acquire(t, c, ctx, "a")
	acquire(t, c, ctx, "b", core.Fair())
	acquire(t, c, ctx, "p", core.Permits(1))
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for _, w := range []struct {
		name string
		opt  core.AcquireOption
	}{{"b", core.Fair()}, {"p", core.Permits(1)}} {
		wg.Go(func() {
			if l, err := c.Acquire(wctx, w.name, 30*time.Second, w.opt, core.WithWait(30*time.Second)); err == nil {
				_ = l.Release(context.Background())
			}
		})
	}
	locktest.Eventually(t, 5*time.Second, "the fair waiter refreshed its place and the permit waiter queued", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return queued[0] >= 2 && queued[1] >= 1
	})
	ago := time.Now().Add(-time.Minute)
	dead := "1000\x00100\x00" + strings.Repeat("d", 32) + "\x00h\x00dead"
	if _, err := admin.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, locktest.Key("b", "queue"), redis.Z{Score: float64(2*ago.UnixMicro() + 1), Member: dead})
		p.HSet(ctx, locktest.Key("b", "queue", "deadlines"), dead, ago.UnixMilli())
		deadPermit := "1000\x00100\x00" + strings.Repeat("e", 32) + "\x001\x00dead" // X: the waiter's limit
		p.ZAdd(ctx, locktest.Key("p", "permits", "queue"), redis.Z{Score: float64(2*ago.UnixMicro() + 1), Member: deadPermit})
		p.HSet(ctx, locktest.Key("p", "permits", "queue", "deadlines"), deadPermit, ago.UnixMilli())
		p.Set(ctx, "lockkit:idem:{@s/k}", "record", time.Minute)
		p.HSet(ctx, "lockkit:idem:{@s/h}", "status", "200")
		p.PExpire(ctx, "lockkit:idem:{@s/h}", time.Minute)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// runAs runs each command as user (password CHANGE-ME, as in the doc) against the server at addr (a
// seed node with cluster), and returns the ones that failed: an exit code other than 0, or 3
// (nothing found).
func runAs(t *testing.T, bin, user, addr string, cluster bool, cmds [][]string) (failed []string) {
	t.Helper()
	s := newSession(t, bin)
	conn := []string{"--url", "redis://" + user + ":CHANGE-ME@" + addr}
	if cluster {
		conn = append(conn, "--cluster")
	}
	for _, args := range cmds {
		if _, code := s.run("", append(slices.Clone(args), conn...)...); code != 0 && code != 3 {
			failed = append(failed, strings.Join(args, " "))
		}
	}
	return failed
}

// aclLog returns the ACL LOG entries of the servers (nil if none).
func aclLog(t *testing.T, servers ...*redistest.Server) []any {
	var out []any
	for _, srv := range servers {
		out = append(out, srv.Do(t, "ACL", "LOG").([]any)...)
	}
	return out
}

// adminClient returns a client of srv with full privileges, closed when the test ends.
func adminClient(t *testing.T, srv *redistest.Server) *redis.Client {
	admin := redis.NewClient(srv.AdminOptions())
	t.Cleanup(func() { _ = admin.Close() })
	return admin
}

// without returns the ACL line without the rule drop.
func without(line, drop string) string {
	return strings.Join(slices.DeleteFunc(strings.Fields(line), func(s string) bool { return s == drop }), " ")
}

// commandsFor are the commands each operator runs.
var commandsFor = map[string][][]string{
	opsUser:    append(slices.Clone(reading), releasing...),
	viewerUser: reading,
}

// The operator's and the read-only operator's lines of docs/security.md, as written, run every
// command they are for (ACL LOG stays empty); the read-only operator's release --force is refused.
// Each command of both lines is needed: without it, a command fails or Redis logs a denial.
// (PING and UNSUBSCRIBE are not checked, as for the service's line: only an idle subscription
// sends them.)
func TestCLI_docACLs(t *testing.T) {
	bin := build(t)
	lines, _ := docACLs(t)
	for user, line := range lines {
		cmds := commandsFor[user]
		t.Run(user, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.WithACL(line))
			admin := adminClient(t, srv)
			busyState(t, admin)
			if failed, log := runAs(t, bin, user, srv.Addr(), false, cmds), aclLog(t, srv); failed != nil || log != nil {
				t.Fatalf("failed: %v; ACL LOG: %v", failed, log)
			}
			if user != viewerUser {
				return
			}
			if failed, log := runAs(t, bin, user, srv.Addr(), false, releasing[:1]), aclLog(t, srv); failed == nil || log == nil {
				t.Fatalf("the read-only operator's release --force: failed %v, ACL LOG %v", failed, log)
			}
			if v, err := admin.Get(context.Background(), locktest.Key("a")).Result(); err != nil || strings.HasPrefix(v, "\x02") {
				t.Fatalf("lock a after the read-only operator's release --force: %q %v, want it held", v, err)
			}
		})
		for _, drop := range strings.Fields(line) {
			if !strings.HasPrefix(drop, "+") || drop == "+ping" || drop == "+unsubscribe" {
				continue
			}
			t.Run(user+"/without"+drop, func(t *testing.T) {
				t.Parallel()
				srv := redistest.Start(t, redistest.WithACL(without(line, drop)))
				busyState(t, adminClient(t, srv))
				if failed, log := runAs(t, bin, user, srv.Addr(), false, cmds), aclLog(t, srv); failed == nil && log == nil {
					t.Fatalf("%s's commands need no %s", user, drop)
				}
			})
		}
	}
}

// The operators' lines with their cluster additions run every command on a Redis Cluster
// (--cluster), and need each addition (but SUNSUBSCRIBE, sent for idle channels only).
func TestCLI_docACLs_cluster(t *testing.T) {
	bin := build(t)
	lines, cluster := docACLs(t)
	var acl []string
	for user, line := range lines {
		acl = append(acl, line+" "+cluster[user])
	}
	cl := redistest.StartCluster(t, redistest.WithACL(acl...))
	nodes := cl.Nodes()
	o := nodes[0].AdminOptions()
	for user, line := range lines {
		run := func(t *testing.T, line string) (failed []string, log []any) {
			for _, n := range nodes {
				n.Do(t, "ACL", "SETUSER", user, "reset")
				n.Do(t, append([]any{"ACL", "SETUSER"}, anys(strings.Fields(line)[1:])...)...)
				n.Do(t, "ACL", "LOG", "RESET")
			}
			for _, m := range cl.Masters(t) {
				m.Flush(t)
			}
			admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Username: o.Username, Password: o.Password, DisableIdentity: true})
			t.Cleanup(func() { _ = admin.Close() })
			busyState(t, admin)
			return runAs(t, bin, user, nodes[0].Addr(), true, commandsFor[user]), aclLog(t, nodes...)
		}
		full := line + " " + cluster[user]
		t.Run(user, func(t *testing.T) {
			if failed, log := run(t, full); failed != nil || log != nil {
				t.Fatalf("failed: %v; ACL LOG: %v", failed, log)
			}
		})
		for _, drop := range strings.Fields(cluster[user]) {
			if drop == "+sunsubscribe" {
				continue
			}
			t.Run(user+"/without"+drop, func(t *testing.T) {
				if failed, log := run(t, without(full, drop)); failed == nil && log == nil {
					t.Fatalf("%s's commands need no %s on a cluster", user, drop)
				}
			})
		}
	}
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}
