package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterSize is the number of nodes of a Cluster: 3 masters, 3 replicas.
	clusterSize = 6
	// clusterMasters is the number of masters of a Cluster.
	clusterMasters = 3
	// clusterTimeout bounds waiting for the cluster to become healthy, or
	// to agree on a failover.
	clusterTimeout = 30 * time.Second
	// clusterPollInterval is the pause between two cluster state checks.
	clusterPollInterval = 50 * time.Millisecond
)

// Cluster is a six-node Redis Cluster (three masters with one replica each)
// started for one test. Like Server, its methods report errors with t.Fatal.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts six cluster-enabled servers (cluster-node-timeout
// 1000 ms), creates a cluster of them with `redis-cli --cluster create
// --cluster-replicas 1`, and waits until every node reports cluster_state:ok,
// all 16384 slots are covered, all nodes agree on the topology and every
// replica has finished its initial sync. The options apply to every node;
// with WithTLS the cluster bus and replication use TLS too. The nodes are
// stopped when the test ends.
func StartCluster(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	Require(t)
	_, cli := binaries(t)
	nodes := startServers(t, clusterSize, newConfig(opts), true)
	c := &Cluster{nodes: nodes}
	// Registered after the nodes' own cleanups, so it runs first and
	// stops them all in parallel.
	t.Cleanup(func() { c.cleanup(t) })
	for _, n := range nodes {
		id, err := n.do(adminTimeout, "CLUSTER", "MYID")
		if err != nil {
			t.Fatalf("redistest: %s: CLUSTER MYID: %v", n.Addr(), err)
		}
		n.nodeID = fmt.Sprint(id)
	}
	c.create(t, cli)
	if err := c.waitHealthy(); err != nil {
		t.Fatalf("redistest: cluster did not become healthy within %v: %v", clusterTimeout, err)
	}
	return c
}

// create runs redis-cli --cluster create.
func (c *Cluster) create(t testing.TB, cli string) {
	t.Helper()
	n0 := c.nodes[0]
	var args []string
	if n0.certs != nil {
		args = append(args, "--tls", "--cacert", n0.certs.caFile)
	}
	if n0.adminUser != "" {
		args = append(args, "--user", n0.adminUser)
	}
	args = append(args, "--cluster", "create")
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Env = os.Environ()
	if n0.adminPass != "" {
		// Keeps the password off the command line and avoids
		// redis-cli's warning about -a.
		cmd.Env = append(cmd.Env, "REDISCLI_AUTH="+n0.adminPass)
	}
	cmd.SysProcAttr = sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: %s %s: %v\n%s", cli, strings.Join(args, " "), err, out)
	}
}

// cleanup stops all nodes in parallel.
func (c *Cluster) cleanup(t testing.TB) {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { n.cleanup(t) })
	}
	wg.Wait()
}

// Addrs returns the addresses of all six nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns all six nodes, in a fixed order.
func (c *Cluster) Nodes() []*Server {
	return slices.Clone(c.nodes)
}

// ClusterOptions returns new cluster client options: every node address,
// the credentials of WithPassword or WithACL, TLSConfig with WithTLS, and
// DisableIdentity. Callers may modify them.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	n0 := c.nodes[0]
	o := n0.Options()
	return &redis.ClusterOptions{
		Addrs:           c.Addrs(),
		Username:        o.Username,
		Password:        o.Password,
		TLSConfig:       o.TLSConfig,
		DisableIdentity: true,
	}
}

// Client returns a new cluster client created from ClusterOptions, closed
// when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(c.ClusterOptions())
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// WaitHealthy waits until the cluster is healthy again, as after
// StartCluster: every node is up and reports cluster_state:ok, all slots
// are covered by three masters, all nodes agree on the topology and the three
// replicas are in sync. Use it after restarting or resuming nodes.
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	if err := c.waitHealthy(); err != nil {
		t.Fatalf("redistest: cluster did not become healthy within %v: %v", clusterTimeout, err)
	}
}

// waitHealthy polls healthy until it succeeds or clusterTimeout passes.
func (c *Cluster) waitHealthy() error {
	return poll(clusterTimeout, c.healthy)
}

// healthy returns nil if the cluster is healthy, or the first reason why not.
func (c *Cluster) healthy() error {
	var want string
	for _, n := range c.nodes {
		if !n.Running() || n.Paused() {
			return fmt.Errorf("node %s is not running", n.Addr())
		}
		var info, nodes, repl string
		err := n.withAdmin(5*time.Second, func(ctx context.Context, cl *redis.Client) (err error) {
			if info, err = cl.ClusterInfo(ctx).Result(); err != nil {
				return err
			}
			if nodes, err = cl.ClusterNodes(ctx).Result(); err != nil {
				return err
			}
			repl, err = cl.Info(ctx, "replication").Result()
			return err
		})
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Addr(), err)
		}
		ci := parseInfo(info)
		for k, v := range map[string]string{
			"cluster_state":          "ok",
			"cluster_slots_assigned": "16384",
			"cluster_slots_ok":       "16384",
			"cluster_known_nodes":    fmt.Sprint(clusterSize),
		} {
			if ci[k] != v {
				return fmt.Errorf("node %s: CLUSTER INFO %s:%s, want %s", n.Addr(), k, ci[k], v)
			}
		}
		view, err := parseClusterNodes(nodes)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Addr(), err)
		}
		sig, err := topologySignature(view)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Addr(), err)
		}
		if want == "" {
			want = sig
		} else if sig != want {
			return fmt.Errorf("nodes disagree on the topology:\n%s\nversus, on %s:\n%s", want, n.Addr(), sig)
		}
		if me := myself(view); me != nil && me.isReplica() {
			ri := parseInfo(repl)
			if ri["master_link_status"] != "up" || ri["master_sync_in_progress"] != "0" {
				return fmt.Errorf("replica %s: master_link_status:%s master_sync_in_progress:%s",
					n.Addr(), ri["master_link_status"], ri["master_sync_in_progress"])
			}
		}
	}
	return nil
}

// topologySignature checks that a node's view of the cluster is healthy (six
// connected nodes, none failing, three masters owning slots and three
// replicas of them) and describes it in a form comparable across nodes.
func topologySignature(view []clusterNode) (string, error) {
	if len(view) != clusterSize {
		return "", fmt.Errorf("CLUSTER NODES lists %d nodes, want %d", len(view), clusterSize)
	}
	masters := map[string]bool{}
	for _, n := range view {
		if n.isMaster() && len(n.slots) > 0 {
			masters[n.id] = true
		}
	}
	if len(masters) != clusterMasters {
		return "", fmt.Errorf("%d masters own slots, want %d", len(masters), clusterMasters)
	}
	var lines []string
	for _, n := range view {
		for _, bad := range []string{"fail", "fail?", "pfail", "handshake", "noaddr"} {
			if n.has(bad) {
				return "", fmt.Errorf("node %s (port %d) has flag %s", n.id, n.port, bad)
			}
		}
		if !n.connected {
			return "", fmt.Errorf("node %s (port %d) is disconnected", n.id, n.port)
		}
		switch {
		case masters[n.id]:
			lines = append(lines, fmt.Sprintf("master %s %v", n.id, n.slots))
		case n.isReplica() && masters[n.masterID]:
			lines = append(lines, fmt.Sprintf("replica %s of %s", n.id, n.masterID))
		default:
			return "", fmt.Errorf("node %s (port %d) is neither a master with slots nor a replica of one", n.id, n.port)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

// poll calls check until it returns nil or timeout passes, and then returns
// check's last error.
func poll(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(clusterPollInterval)
	}
}

// errNoReachableNode is returned when every node is stopped or paused.
const errNoReachableNode = constError("no cluster node is running and not paused")

// reachable returns the nodes that are running and not paused.
func (c *Cluster) reachable() []*Server {
	var out []*Server
	for _, n := range c.nodes {
		if n.Running() && !n.Paused() {
			out = append(out, n)
		}
	}
	return out
}

// byID returns the node with the given cluster node ID, or nil.
func (c *Cluster) byID(id string) *Server {
	for _, n := range c.nodes {
		if n.nodeID == id {
			return n
		}
	}
	return nil
}
