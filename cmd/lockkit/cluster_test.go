package main_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

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
		if m := cl.MasterOf(t, locktest.Key(name)).Addr(); !masters[m] {
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
