package chaos_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

const clusterTTL = time.Second

// runCluster: two clients over a six-node cluster take one lock per shard in a loop while the
// master of a shard fails over: cleanly (CLUSTER FAILOVER: the locks survive on the new master), or
// because it stopped answering (SIGSTOP past the TTL and the node timeout, then its replica is
// promoted): the holders on that shard are cancelled before their replicated locks expire.
// WithReplicaAck(1) makes every acquisition reach a replica before it is granted.
func runCluster(t *testing.T, rep *chaos.Report) {
	row := rep.Row("cluster, 3 masters + 3 replicas: failovers")
	cl := redistest.StartCluster(t)
	secs := newSections()
	var clients []*core.Client
	for range 2 {
		clients = append(clients, locktest.NewClient(t, cl.Client(t), core.WithHook(secs.hook()),
			core.WithReplicaAck(1, 200*time.Millisecond)))
	}
	names := map[*redistest.Server]string{}
	for i := 0; len(names) < 3 && i < 1000; i++ {
		name := "shard-" + strconv.Itoa(i)
		if m := cl.MasterOf(t, locktest.Key(name)); names[m] == "" {
			names[m] = name
		}
	}
	var list []string
	for _, n := range names {
		list = append(list, n)
	}
	stop := make(chan struct{})
	wg := secs.workers(clients, 3, list, clusterTTL, 2*clusterTTL, stop)
	rounds := pick(2, 8)
	for r := range rounds {
		time.Sleep(clusterTTL) // quiet time between faults
		master := cl.MasterOf(t, "lockkit:{"+list[r%len(list)]+"}")
		start := time.Now()
		if r%2 == 0 {
			cl.Failover(t, master)
		} else {
			master.Pause(t)
			time.Sleep(clusterTTL * 3 / 2) // silent past the TTL: the shard's holders cannot renew
			cl.Failover(t, master)         // FORCE, unless Redis promoted the replica by itself
			master.Resume(t)
			for _, dl := range secs.lostSince(start, time.Now()) {
				row.Detection(dl)
			}
		}
		row.Faults(1)
		cl.WaitHealthy(t)
	}
	want := pick(4, 10) // the workload must have run; two bounded rounds give ~10
	secs.settle(want, 30*time.Second)
	close(stop)
	wg.Wait()
	n, lost := secs.check(t, row)
	t.Logf("cluster: %d sections (%d lost), %d failovers, errors %v", n, lost, rounds, secs.errs)
	if n < want {
		t.Errorf("only %d critical sections, want at least %d", n, want)
	}
}
