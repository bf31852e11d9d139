package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// failoverModeTimeout bounds waiting for a promotion after one CLUSTER
// FAILOVER attempt (Redis gives a manual failover 5 s).
const failoverModeTimeout = 6 * time.Second

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id        string
	port      int
	flags     []string
	masterID  string // "" for masters
	connected bool
	slots     []slotRange
}

// slotRange is an inclusive range of hash slots.
type slotRange struct{ start, end int }

// String formats the range as CLUSTER NODES does.
func (r slotRange) String() string {
	if r.start == r.end {
		return strconv.Itoa(r.start)
	}
	return fmt.Sprintf("%d-%d", r.start, r.end)
}

// has reports whether the node has the flag.
func (n *clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

// isMaster reports whether the node is flagged master.
func (n *clusterNode) isMaster() bool { return n.has("master") }

// isReplica reports whether the node is flagged as a replica.
func (n *clusterNode) isReplica() bool { return n.has("slave") || n.has("replica") }

// parseClusterNodes parses the output of CLUSTER NODES:
// "<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv>
// <config-epoch> <link-state> <slot> <slot> ...".
func parseClusterNodes(text string) ([]clusterNode, error) {
	var nodes []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("bad CLUSTER NODES line %q", line)
		}
		n := clusterNode{id: f[0], flags: strings.Split(f[2], ","), connected: f[7] == "connected"}
		addr, _, _ := strings.Cut(f[1], "@")
		if i := strings.LastIndexByte(addr, ':'); i >= 0 {
			n.port, _ = strconv.Atoi(addr[i+1:])
		}
		if f[3] != "-" {
			n.masterID = f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // migrating or importing
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			start, err := strconv.Atoi(lo)
			end := start
			if err == nil && isRange {
				end, err = strconv.Atoi(hi)
			}
			if err != nil {
				return nil, fmt.Errorf("bad slot %q in CLUSTER NODES line %q", s, line)
			}
			n.slots = append(n.slots, slotRange{start, end})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// myself returns the entry of the node that produced the view, or nil.
func myself(view []clusterNode) *clusterNode {
	return find(view, func(n *clusterNode) bool { return n.has("myself") })
}

// find returns the first entry of view matching pred, or nil.
func find(view []clusterNode, pred func(*clusterNode) bool) *clusterNode {
	for i := range view {
		if pred(&view[i]) {
			return &view[i]
		}
	}
	return nil
}

// clusterNodes returns the node's view of the cluster (CLUSTER NODES).
func (s *Server) clusterNodes() ([]clusterNode, error) {
	var text string
	err := s.withAdmin(5*time.Second, func(ctx context.Context, c *redis.Client) (err error) {
		text, err = c.ClusterNodes(ctx).Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER NODES: %w", s.Addr(), err)
	}
	return parseClusterNodes(text)
}

// view returns the cluster view of the first node that is running, not
// paused and answers.
func (c *Cluster) view() ([]clusterNode, error) {
	var err error = errNoReachableNode
	for _, n := range c.reachable() {
		var view []clusterNode
		if view, err = n.clusterNodes(); err == nil {
			return view, nil
		}
	}
	return nil, err
}

// Masters returns the nodes that currently own hash slots, ordered by their
// first slot, as seen by the first node that is running and not paused. The
// topology changes after a failover.
func (c *Cluster) Masters(t testing.TB) []*Server {
	t.Helper()
	view, err := c.view()
	if err != nil {
		t.Fatalf("redistest: Masters: %v", err)
	}
	var owners []clusterNode
	for _, n := range view {
		if n.isMaster() && len(n.slots) > 0 {
			owners = append(owners, n)
		}
	}
	slices.SortFunc(owners, func(a, b clusterNode) int { return a.slots[0].start - b.slots[0].start })
	masters := make([]*Server, 0, len(owners))
	for _, n := range owners {
		s := c.byID(n.id)
		if s == nil {
			t.Fatalf("redistest: Masters: unknown node %s", n.id)
		}
		masters = append(masters, s)
	}
	return masters
}

// MasterOf returns the node currently serving key's hash slot, according to
// CLUSTER KEYSLOT and CLUSTER SHARDS on the first node that is running and not
// paused.
func (c *Cluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	var err error = errNoReachableNode
	for _, n := range c.reachable() {
		var slot int64
		var shards []redis.ClusterShard
		err = n.withAdmin(5*time.Second, func(ctx context.Context, cl *redis.Client) (err error) {
			if slot, err = cl.ClusterKeySlot(ctx, key).Result(); err != nil {
				return err
			}
			shards, err = cl.ClusterShards(ctx).Result()
			return err
		})
		if err != nil {
			continue
		}
		id, err := shardMaster(shards, slot)
		if err != nil {
			t.Fatalf("redistest: MasterOf(%q) according to %s: %v", key, n.Addr(), err)
		}
		if s := c.byID(id); s != nil {
			return s
		}
		t.Fatalf("redistest: MasterOf(%q): slot %d is served by unknown node %s", key, slot, id)
	}
	t.Fatalf("redistest: MasterOf(%q): %v", key, err)
	return nil
}

// shardMaster returns the ID of the master of the shard holding slot.
func shardMaster(shards []redis.ClusterShard, slot int64) (string, error) {
	for _, sh := range shards {
		if !slices.ContainsFunc(sh.Slots, func(r redis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
			continue
		}
		for _, node := range sh.Nodes {
			if node.Role == "master" {
				return node.ID, nil
			}
		}
		return "", fmt.Errorf("the shard holding slot %d has no master: %+v", slot, sh.Nodes)
	}
	return "", fmt.Errorf("slot %d is not covered", slot)
}

// ReplicaOf returns a replica of master: the first node (in Nodes order) that,
// asked itself, reports being a replica of master. If no such node is running
// and not paused, it falls back to the cluster view of the other nodes, and
// fails the test if master has no replica there either.
func (c *Cluster) ReplicaOf(t testing.TB, master *Server) *Server {
	t.Helper()
	if r := c.replicaOf(master); r != nil {
		return r
	}
	t.Fatalf("redistest: ReplicaOf: master %s has no replica", master.Addr())
	return nil
}

// replicaOf is ReplicaOf returning nil when there is no replica.
func (c *Cluster) replicaOf(master *Server) *Server {
	isReplica := func(n *clusterNode) bool { return n.isReplica() && n.masterID == master.nodeID }
	for _, n := range c.reachable() {
		if view, err := n.clusterNodes(); err == nil {
			if me := myself(view); me != nil && isReplica(me) {
				return n
			}
		}
	}
	if view, err := c.view(); err == nil {
		for _, n := range c.nodes {
			if e := find(view, func(e *clusterNode) bool { return e.id == n.nodeID }); e != nil && isReplica(e) {
				return n
			}
		}
	}
	return nil
}

// Failover promotes a replica of master (see ReplicaOf) with CLUSTER
// FAILOVER: a coordinated failover if master is running and not paused, FORCE
// otherwise or if that does not succeed, and TAKEOVER as a last resort. It
// waits until the replica reports itself master and every node that is
// running and not paused agrees that it owns the old master's slots; if the
// old master is reachable, also until it has become a replica of the new
// master in sync with it. (A paused or killed master's replica may also be
// promoted by Redis' own failover, which Failover accepts.)
//
// A ClusterClient that already exists learns the new owner from MOVED
// replies while the old master is alive. If the old master is paused or
// stopped, it keeps sending that shard's commands there until it reloads the
// slot map (ReloadState reloads in the background); a new client sees the
// new topology at once.
func (c *Cluster) Failover(t testing.TB, master *Server) {
	t.Helper()
	view, err := c.view()
	if err != nil {
		t.Fatalf("redistest: Failover: %v", err)
	}
	old := find(view, func(n *clusterNode) bool { return n.id == master.nodeID })
	if old == nil || !old.isMaster() || len(old.slots) == 0 {
		t.Fatalf("redistest: Failover: %s is not a master owning slots", master.Addr())
	}
	slots := old.slots
	replica := c.replicaOf(master)
	if replica == nil {
		// Redis' own failover (of a paused or killed master) may have promoted the replica
		// between the view above and now: it then reports itself master of those slots.
		if replica = c.ownerOf(master, slots); replica == nil {
			t.Fatalf("redistest: Failover: master %s has no replica", master.Addr())
		}
	}

	modes := []string{"", "FORCE", "TAKEOVER"}
	if !master.Running() || master.Paused() {
		modes = modes[1:]
	}
	var errs []error
	promoted := false
	for _, mode := range modes {
		args := []any{"CLUSTER", "FAILOVER"}
		if mode != "" {
			args = append(args, mode)
		}
		_, ferr := replica.do(adminTimeout, args...)
		err := poll(failoverModeTimeout, func() error { return isMaster(replica) })
		if err == nil {
			promoted = true
			break
		}
		errs = append(errs, fmt.Errorf("CLUSTER FAILOVER %s: %v; then: %w", mode, ferr, err))
	}
	if !promoted {
		t.Fatalf("redistest: Failover: replica %s of %s was not promoted: %v", replica.Addr(), master.Addr(), errors.Join(errs...))
	}
	if err := poll(clusterTimeout, func() error { return c.failedOver(master, replica, slots) }); err != nil {
		t.Fatalf("redistest: Failover: nodes did not agree that %s replaced %s within %v: %v",
			replica.Addr(), master.Addr(), clusterTimeout, err)
	}
}

// ownerOf returns the node other than master that reports itself master of exactly slots, or nil.
func (c *Cluster) ownerOf(master *Server, slots []slotRange) *Server {
	for _, n := range c.reachable() {
		if n == master {
			continue
		}
		if view, err := n.clusterNodes(); err == nil {
			if me := myself(view); me != nil && me.isMaster() && slices.Equal(me.slots, slots) {
				return n
			}
		}
	}
	return nil
}

// isMaster returns nil if the node reports itself as a master.
func isMaster(s *Server) error {
	view, err := s.clusterNodes()
	if err != nil {
		return err
	}
	if me := myself(view); me == nil || !me.isMaster() {
		return fmt.Errorf("%s is not a master yet", s.Addr())
	}
	return nil
}

// failedOver returns nil once every reachable node sees newMaster owning
// slots and oldMaster owning none, and oldMaster, if reachable, is an in-sync
// replica of newMaster.
func (c *Cluster) failedOver(oldMaster, newMaster *Server, slots []slotRange) error {
	for _, n := range c.reachable() {
		view, err := n.clusterNodes()
		if err != nil {
			return err
		}
		nw := find(view, func(e *clusterNode) bool { return e.id == newMaster.nodeID })
		if nw == nil || !nw.isMaster() || !slices.Equal(nw.slots, slots) {
			return fmt.Errorf("%s does not yet see %s as master of slots %v", n.Addr(), newMaster.Addr(), slots)
		}
		old := find(view, func(e *clusterNode) bool { return e.id == oldMaster.nodeID })
		if old != nil && len(old.slots) > 0 {
			return fmt.Errorf("%s still sees %s owning slots %v", n.Addr(), oldMaster.Addr(), old.slots)
		}
		if n != oldMaster {
			continue
		}
		if me := myself(view); me == nil || !me.isReplica() || me.masterID != newMaster.nodeID {
			return fmt.Errorf("old master %s is not yet a replica of %s", n.Addr(), newMaster.Addr())
		}
		repl, err := n.do(5*time.Second, "INFO", "replication")
		if err != nil {
			return err
		}
		if ri := parseInfo(fmt.Sprint(repl)); ri["master_link_status"] != "up" || ri["master_sync_in_progress"] != "0" {
			return fmt.Errorf("old master %s is not yet in sync with %s", n.Addr(), newMaster.Addr())
		}
	}
	return nil
}
