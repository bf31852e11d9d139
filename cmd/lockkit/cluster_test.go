package main_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// The commands on a 3-master cluster: ls scans every master (from one seed), inspect, release and
// watch find each name's master; then the docs' command lines with --cluster.
func TestCLI_cluster(t *testing.T) {
	bin := build(t)
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	c := locktest.NewClient(t, cl.Client(t), core.WithLabel("clustered"))
	s := newSession(t, bin)
	addrs := cl.Addrs()
	for i, a := range addrs {
		s.mask(a, "SEED"+strconv.Itoa(i))
	}
	// One lock on each master (slot ranges and key slots are fixed, so the names are too).
	masters := map[string]bool{}
	var names []string
	for i := 0; len(masters) < 3 && i < 1000; i++ {
		name := "acct-" + strconv.Itoa(i)
		if m := cl.MasterOf(t, "lockkit:{"+name+"}").Addr(); !masters[m] {
			masters[m] = true
			names = append(names, name)
			s.maskLock(acquire(t, c, ctx, name), name)
		}
	}
	seed := "redis://" + addrs[0]
	s.run("", "ls", "--cluster", "--url", seed)
	s.run("", "ls", "--cluster", "--url", seed, "--json", "acct-*")
	s.run("", "inspect", "--cluster", "--url", "redis://"+addrs[1]+",redis://"+addrs[2], names[2])
	s.run("", "release", "--force", "--yes", "--cluster", "--url", seed, names[1])
	s.run("", "ls", "--cluster", "--url", seed)
	out, code := s.run("", "watch", "--cluster", "--url", seed, "--for", "300ms", "--json", names[0])
	if code != 0 || !strings.Contains(out, `"event":"state"`) {
		t.Fatalf("watch: %d %q", code, out)
	}
	s.run("", "idem", "--cluster", "--url", seed, "scope", "key")
	s.run("", "inspect", "--cluster", "--sentinel", "x:1", "--master", "m", "x")
	s.golden("cluster")
	// The docs' command lines for a cluster (see TestDocs_commands).
	t.Run("docs", func(t *testing.T) { runDocCommands(t, bin, clusterTarget(t, cl), isCluster) })
}

// The least-privilege ACL of docs/security.md for the command is enough for every command, and
// the lockkit application user's ACL is still enough to take the locks: ACL LOG stays empty.
func TestCLI_leastPrivilegeACL(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t, redistest.WithACL(appACL, opsACL))
	rdb := srv.Client(t) // the application user (the first line)
	ctx := context.Background()
	c := locktest.NewClient(t, rdb)
	acquire(t, c, ctx, "a")
	acquire(t, c, ctx, "b", core.Fair())
	rdb.Set(ctx, "lockkit:idem:{@s/k}", "record", time.Minute)
	// A live permit of semaphore "p" (written as the admin: the service ACL above predates them).
	srv.Do(t, "ZADD", "lockkit:{p}:permits", time.Now().Add(time.Minute).UnixMilli(), "token")
	url := "redis://lockkit-ops:ops-secret@" + srv.Addr()
	s := newSession(t, bin)
	for _, args := range [][]string{
		{"ls"}, {"ls", "--json"}, {"inspect", "a"}, {"inspect", "--json", "b"}, {"idem", "--body", "s", "k"},
		{"idem", "s", "none"}, {"watch", "--for", "300ms", "a"}, {"release", "--force", "--yes", "a"},
		{"release", "--force", "--yes", "b"}, {"ls", "p"}, {"inspect", "p"}, {"release", "--force", "--yes", "p"},
	} {
		if _, code := s.run("", append(args, "--url", url)...); code != 0 && code != 3 {
			t.Errorf("lockkit %v: exit %d\n%s", args, code, s.script.String())
		}
	}
	if log := srv.Do(t, "ACL", "LOG"); len(log.([]any)) != 0 {
		t.Fatalf("ACL LOG: %v", log)
	}
}

// appACL is the lockkit user of docs/security.md; opsACL is the lockkit command's.
const (
	appACL = "user lockkit on >lockkit-secret resetkeys ~lockkit:* resetchannels &lockkit:* -@all +evalsha +eval +script|load +get +set +pexpire +pttl +time +hget +hset +hdel +zadd +zscore +zpopmin +zrem +publish +subscribe +unsubscribe +ping +wait"
	opsACL = "user lockkit-ops on >ops-secret resetkeys ~lockkit:* resetchannels &lockkit:* -@all +evalsha +eval +script|load +time +hvals +hgetall +pttl +get +scan +type +strlen +del +set +lindex +lpop +hget +hdel +publish +subscribe +unsubscribe +ping +pubsub|numsub +zrangebyscore +zscore +hmget +zcount +lrange +zrange +zrem"
)
