package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockkit/lockkit/internal/redisinfo"
	"github.com/redis/go-redis/v9"
)

// lockkit doctor checks a deployment for what lockkit needs, as etcdctl check perf does for etcd:
// each check gives a verdict (ok, warn, unsafe), what it measured, and, unless ok, the fix. It
// exits with exitUnsafe when a check says unsafe.

// doctorAbout is what "lockkit help doctor" says.
const doctorAbout = `Check the Redis deployment for what lockkit needs, the way etcdctl check perf does for etcd.
Each check prints its verdict (ok, warn or unsafe), the server, what it measured and, unless ok,
the fix (text: on the next line; --json: one object per check, fields check, node, verdict, value,
fix). The checks, on every master lockkit writes to (the server; each Redlock node with --redlock
and several --url; the master the Sentinels name; each master of a cluster): topology (each is
reached; cluster_state; a Redlock quorum); version (7.0 or later); eviction (maxmemory and
maxmemory-policy: a policy that can evict lock keys is unsafe; memory headroom); persistence
(what a restart does to held locks and fences); replicas (whether --replica-ack N can be met);
commands (scripts and pub/sub answered: not renamed away); acl (the connected user's grants
against docs/security.md, probed with commands that change nothing); latency (PING p50 and p99
against --ttl: a renewal every TTL/3 needs a round trip well inside it); keys (lockkit's keys
without a TTL: there must be none). A check that cannot look (INFO or SCAN denied) warns.

Exit code 5 when a check says unsafe, 0 otherwise.`

// Verdicts.
const (
	verdictOK     = "ok"     // nothing to do
	verdictWarn   = "warn"   // works, with a cost or a risk the fix removes (or the check could not look)
	verdictUnsafe = "unsafe" // a lock can stop excluding, or lockkit cannot work
)

// errUnsafe ends doctor with exitUnsafe after its output.
var errUnsafe = errors.New("a check found the deployment unsafe")

// finding is one check's result on one server: a line of doctor's output.
type finding struct {
	Check   string `json:"check"`
	Node    string `json:"node"`
	Verdict string `json:"verdict"`
	Value   string `json:"value"`
	Fix     string `json:"fix,omitempty"`
}

// server is a server doctor checks: a master lockkit writes to.
type server struct {
	name string
	rdb  *redis.Client
	err  error // why it cannot be reached
}

// doctor is one run of lockkit doctor.
type doctor struct {
	e          *env
	ttl        time.Duration
	samples    int
	replicaAck int
	redlock    bool
	found      []finding
}

func setupDoctor(fs *flag.FlagSet) runner {
	d := &doctor{}
	durationVar(fs, &d.ttl, "ttl", 10*time.Second, "the shortest lock `TTL` the services use: a renewal (every TTL/3) needs a round trip well inside it")
	fs.IntVar(&d.samples, "samples", 100, "round trips (PING) measured per server, `N`")
	fs.IntVar(&d.replicaAck, "replica-ack", 0, "the services use core.WithReplicaAck(`N`, …): check that each master has N replicas")
	fs.BoolVar(&d.redlock, "redlock", false, "the --url servers are independent Redlock nodes (core.NewRedlock)")
	return func(ctx context.Context, e *env, _ []string) error {
		d.e = e
		if d.ttl <= 0 || d.samples < 1 || d.replicaAck < 0 {
			return usageError{error: errors.New("--ttl and --samples must be positive, --replica-ack not negative")}
		}
		return d.run(ctx)
	}
}

// add records a finding.
func (d *doctor) add(check, node, verdict, value, fix string) {
	if verdict == verdictOK {
		fix = ""
	}
	d.found = append(d.found, finding{Check: check, Node: node, Verdict: verdict, Value: value, Fix: fix})
}

func (d *doctor) run(ctx context.Context) error {
	servers, closeAll, err := d.servers(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	for _, s := range servers {
		if s.err != nil {
			continue
		}
		d.version(ctx, s)
		d.eviction(ctx, s)
		d.persistence(ctx, s)
		d.replicas(ctx, s)
		d.commands(ctx, s)
		d.latency(ctx, s)
		d.keysWithoutTTL(ctx, s)
	}
	if err := d.print(d.e.out); err != nil {
		return err
	}
	for _, f := range d.found {
		if f.Verdict == verdictUnsafe {
			return errUnsafe
		}
	}
	return nil
}

// print writes the findings: one JSON object per line with --json; otherwise one line per finding
// (its fix on the next line), then a count of each verdict.
func (d *doctor) print(w io.Writer) error {
	if d.e.json {
		for _, f := range d.found {
			if err := printJSON(w, f); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	count := map[string]int{}
	for _, f := range d.found {
		count[f.Verdict]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Verdict, f.Check, f.Node, f.Value)
		if f.Fix != "" {
			fmt.Fprintf(tw, "\t\t\tfix: %s\n", f.Fix)
		}
	}
	fmt.Fprintf(tw, "%d ok, %d warn, %d unsafe\n", count[verdictOK], count[verdictWarn], count[verdictUnsafe])
	return tw.Flush()
}

// servers finds the masters lockkit writes to as the flags say, and adds the topology's findings:
// the server; each Redlock node; the master a Sentinel names; each master of a cluster.
func (d *doctor) servers(ctx context.Context) ([]server, func(), error) {
	if d.redlock {
		return d.redlockNodes(ctx)
	}
	rdb, err := d.e.client(d.e.errOut)
	if err != nil {
		return nil, nil, err
	}
	closeAll := func() { _ = rdb.Close() }
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		s, closeNodes := d.clusterMasters(ctx, r)
		return s, func() { closeNodes(); closeAll() }, nil
	case *redis.Client:
		name, kind := r.Options().Addr, "standalone server"
		if len(d.e.sentinels) > 0 {
			name, kind = d.sentinelMaster(ctx), "Sentinel master "+d.e.master
		}
		s := server{name: name, rdb: r, err: r.Ping(ctx).Err()}
		d.reached(s, kind, verdictUnsafe)
		return []server{s}, closeAll, nil
	}
	return nil, nil, fmt.Errorf("unexpected client %T", rdb)
}

// reached adds the topology finding of s: reached, or unreachable with verdict down.
func (d *doctor) reached(s server, kind, down string) {
	if s.err != nil {
		d.add("topology", s.name, down, kind+": unreachable: "+s.err.Error(),
			"start it or fix the address and credentials: holds whose names live on it cannot be taken or renewed")
		return
	}
	d.add("topology", s.name, verdictOK, kind+": reached", "")
}

// nodeOptions returns the options of a connection to one server, with the command's timeouts.
func (d *doctor) nodeOptions(o *redis.Options) *redis.Options {
	o.ReadTimeout, o.WriteTimeout, o.DialTimeout, o.DisableIdentity = d.e.timeout, d.e.timeout, d.e.timeout, true
	o.MaxRetries, o.DialerRetries = 1, 1
	return o
}

// redlockNodes connects to each --url as a Redlock node: one unreachable is a warning while a
// quorum is reached, unsafe otherwise.
func (d *doctor) redlockNodes(ctx context.Context) ([]server, func(), error) {
	if d.e.cluster || len(d.e.sentinels) > 0 || len(d.e.urls) == 0 {
		return nil, nil, usageError{error: errors.New("--redlock needs the nodes as --url, without --cluster or --sentinel")}
	}
	var servers []server
	var clients []*redis.Client
	up := 0
	for _, u := range d.e.urls {
		o, err := parseURL(u)
		if err != nil {
			return nil, nil, usageError{error: err}
		}
		if err := d.e.tls(o); err != nil {
			return nil, nil, err
		}
		c := redis.NewClient(d.nodeOptions(o))
		clients = append(clients, c)
		s := server{name: o.Addr, rdb: c, err: c.Ping(ctx).Err()}
		if s.err == nil {
			up++
		}
		servers = append(servers, s)
	}
	quorum := len(servers)/2 + 1
	down := verdictWarn
	if up < quorum {
		down = verdictUnsafe
	}
	for i, s := range servers {
		d.reached(s, fmt.Sprintf("Redlock node %d of %d (quorum %d, %d reached)", i+1, len(servers), quorum, up), down)
	}
	return servers, func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}, nil
}

// sentinelMaster returns the address of the master the Sentinels name, or how doctor names it when
// none answers (a finding says so).
func (d *doctor) sentinelMaster(ctx context.Context) string {
	var errs []string
	for _, addr := range d.e.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: d.e.timeout, ReadTimeout: d.e.timeout,
			DisableIdentity: true, MaxRetries: 1, DialerRetries: 1})
		a, err := sc.GetMasterAddrByName(ctx, d.e.master).Result()
		_ = sc.Close()
		if err == nil && len(a) == 2 {
			return a[0] + ":" + a[1]
		}
		errs = append(errs, fmt.Sprintf("%s: %v", addr, err))
	}
	d.add("topology", "sentinel", verdictUnsafe, "no Sentinel names master "+d.e.master+": "+strings.Join(errs, "; "),
		"check --sentinel and --master: a failover needs the Sentinels")
	return "master " + d.e.master
}

// clusterMasters finds every master of the cluster's slot map and connects to each; the cluster's
// state must be ok.
func (d *doctor) clusterMasters(ctx context.Context, cl *redis.ClusterClient) ([]server, func()) {
	seed := strings.Join(cl.Options().Addrs, ",")
	shards, err := cl.ClusterShards(ctx).Result()
	if err != nil {
		d.add("topology", seed, verdictUnsafe, "cluster: no slot map: "+err.Error(), "check the --url seed nodes")
		return nil, func() {}
	}
	if info, err := cl.ClusterInfo(ctx).Result(); err == nil {
		state := redisinfo.Parse(info)["cluster_state"]
		verdict := verdictOK
		if state != "ok" {
			verdict = verdictUnsafe
		}
		d.add("topology", seed, verdict, "cluster_state "+state,
			"every slot needs a reachable master: start the failed masters or let their replicas take over")
	}
	owned := map[string]int{}
	var order []string
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Role != "master" || len(sh.Slots) == 0 {
				continue
			}
			port := n.Port
			if cl.Options().TLSConfig != nil {
				port = n.TLSPort
			}
			a := net.JoinHostPort(n.IP, strconv.FormatInt(port, 10))
			order = append(order, a)
			for _, r := range sh.Slots {
				owned[a] += int(r.End - r.Start + 1)
			}
		}
	}
	o := cl.Options()
	var servers []server
	var clients []*redis.Client
	for _, a := range order {
		c := redis.NewClient(d.nodeOptions(&redis.Options{Addr: a, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig}))
		clients = append(clients, c)
		s := server{name: a, rdb: c, err: c.Ping(ctx).Err()}
		d.reached(s, "cluster master of "+strconv.Itoa(owned[a])+" slots", verdictUnsafe)
		servers = append(servers, s)
	}
	return servers, func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
}
