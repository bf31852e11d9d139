package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockkit/lockkit/internal/redisinfo"
	"github.com/redis/go-redis/v9"
)

// The commands a service's Redis user needs (docs/security.md, "The ACL of a lockkit user"; a test
// compares these lists with the doc's).
var (
	serviceCommands = []string{"evalsha", "eval", "get", "set", "pexpire", "pttl", "time", "hget", "hset", "hdel", "zadd",
		"zscore", "zpopmin", "zrem", "publish", "subscribe", "unsubscribe", "ping", "wait"}
	// semaphores and read-write locks (core.Permits, core.Read, core.Write)
	permitCommands  = []string{"zcard", "zcount", "zrange", "zrangebyscore", "zrank", "exists", "del"}
	clusterCommands = []string{"spublish", "ssubscribe", "sunsubscribe", "cluster|slots", "command"}
)

// info reads an INFO section of s; a denial or an error is a warning of check.
func (d *doctor) info(ctx context.Context, s server, check, section string) (redisinfo.Info, bool) {
	reply, err := s.rdb.Info(ctx, section).Result()
	if err != nil {
		d.add(check, s.name, verdictWarn, "cannot read INFO "+section+": "+err.Error(),
			"run lockkit doctor as a user with +info (an operator's user)")
		return nil, false
	}
	return redisinfo.Parse(reply), true
}

// version checks the server's version: lockkit's read-only scripts declare flags (Redis 7.0).
func (d *doctor) version(ctx context.Context, s server) {
	i, ok := d.info(ctx, s, "version", "server")
	if !ok {
		return
	}
	v := i["redis_version"]
	major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	value := "redis_version " + v
	if vk := i["valkey_version"]; vk != "" {
		value += ", valkey_version " + vk
	}
	verdict := verdictOK
	if major < 7 {
		verdict = verdictUnsafe
	}
	d.add("version", s.name, verdict, value, "lockkit needs Redis 7.0 or later (script flags, EVAL_RO, sharded pub/sub)")
}

// eviction checks that the server cannot evict lockkit's keys, and the memory left.
func (d *doctor) eviction(ctx context.Context, s server) {
	i, ok := d.info(ctx, s, "eviction", "memory")
	if !ok {
		return
	}
	ev := redisinfo.EvictionOf(i)
	value := fmt.Sprintf("maxmemory %d, maxmemory-policy %s, used_memory %d", ev.MaxMemory, ev.Policy, ev.Used)
	switch {
	case ev.Evicts():
		d.add("eviction", s.name, verdictUnsafe, value+": eviction can remove held locks' keys", ev.Fix())
	case ev.MaxMemory > 0 && ev.Used*10 >= ev.MaxMemory*9:
		d.add("eviction", s.name, verdictWarn, fmt.Sprintf("%s: %d%% of maxmemory used", value, ev.Used*100/ev.MaxMemory),
			"raise maxmemory or free memory: when full, every acquisition fails with OOM")
	default:
		d.add("eviction", s.name, verdictOK, value, "")
	}
}

// persistence says what a restart does to held locks and fences.
func (d *doctor) persistence(ctx context.Context, s server) {
	i, ok := d.info(ctx, s, "persistence", "persistence")
	if !ok {
		return
	}
	fsync := ""
	if r, err := s.rdb.ConfigGet(ctx, "appendfsync").Result(); err == nil { // (CONFIG may be renamed away or denied)
		fsync = r["appendfsync"]
	}
	value := "aof_enabled " + i["aof_enabled"]
	if fsync != "" && i["aof_enabled"] == "1" {
		value += ", appendfsync " + fsync
	}
	switch {
	case i["aof_enabled"] == "1" && (fsync == "always" || fsync == ""):
		d.add("persistence", s.name, verdictOK, value+": a restart keeps held locks and fence counters", "")
	case i["aof_enabled"] == "1":
		d.add("persistence", s.name, verdictWarn, value+": a crash loses the last second's writes: a lock taken then is free after the restart",
			"appendfsync always (Redlock nodes need it: core.NewRedlock)")
	default:
		d.add("persistence", s.name, verdictWarn, value+": a restart frees every held lock (each holder learns it at its next renewal; "+
			"another caller may take the name before); fences keep increasing while the server's clock does",
			"appendonly yes, appendfsync always; or restart a server only after the longest TTL has passed")
	}
}

// replicas checks the replicas of the master: whether core.WithReplicaAck(N, …) can be met.
func (d *doctor) replicas(ctx context.Context, s server) {
	i, ok := d.info(ctx, s, "replicas", "replication")
	if !ok {
		return
	}
	online, maxLag := 0, int64(0)
	for k, v := range i {
		if !strings.HasPrefix(k, "slave") || !strings.Contains(v, "state=online") {
			continue
		}
		online++
		for f := range strings.SplitSeq(v, ",") {
			if l, ok := strings.CutPrefix(f, "lag="); ok {
				n, _ := strconv.ParseInt(l, 10, 64)
				maxLag = max(maxLag, n)
			}
		}
	}
	value := fmt.Sprintf("role %s, %d replicas online, max lag %ds", i["role"], online, maxLag)
	switch {
	case i["role"] != "master":
		d.add("replicas", s.name, verdictUnsafe, value, "lockkit writes to masters: connect to the master (or through Sentinel)")
	case online < d.replicaAck:
		d.add("replicas", s.name, verdictUnsafe, value+fmt.Sprintf(": WithReplicaAck(%d) cannot be met: every acquisition fails", d.replicaAck),
			"add replicas or lower WithReplicaAck's count")
	case d.replicaAck > 0 && maxLag > 1:
		d.add("replicas", s.name, verdictWarn, value+": acquisitions wait for the lagging replicas", "find why replication lags")
	default:
		d.add("replicas", s.name, verdictOK, value, "")
	}
}

// latency measures round trips (PING) and compares them with the renewal interval (TTL/3): a
// renewal must fit well inside it, retries included.
func (d *doctor) latency(ctx context.Context, s server) {
	rtt := make([]time.Duration, 0, d.samples)
	for range d.samples {
		start := time.Now()
		if err := s.rdb.Ping(ctx).Err(); err != nil {
			d.add("latency", s.name, verdictUnsafe, "PING failed: "+err.Error(), "check the network and the server's load")
			return
		}
		rtt = append(rtt, time.Since(start))
	}
	slices.Sort(rtt)
	p50, p99 := rtt[len(rtt)/2], rtt[(len(rtt)*99)/100]
	if len(rtt) < 100 {
		p99 = rtt[len(rtt)-1]
	}
	us := func(d time.Duration) string { return d.Round(time.Microsecond).String() }
	value := fmt.Sprintf("p50 %s, p99 %s over %d round trips; TTL %s renews every %s", us(p50), us(p99), len(rtt), dur(d.ttl), dur(d.ttl/3))
	fix := "use a longer TTL (--ttl, the services' TTL) or bring Redis closer: a renewal needs a round trip well inside TTL/3"
	switch {
	case p99 > d.ttl/6:
		d.add("latency", s.name, verdictUnsafe, value+": p99 above TTL/6", fix)
	case p99 > d.ttl/30:
		d.add("latency", s.name, verdictWarn, value+": p99 above TTL/30", fix)
	default:
		d.add("latency", s.name, verdictOK, value, "")
	}
}

// keysWithoutTTL scans lockkit's keys (the prefix) for keys without a TTL: lockkit writes none.
func (d *doctor) keysWithoutTTL(ctx context.Context, s server) {
	const limit = 100000 // keys looked at, at most
	var (
		seen   int
		noTTL  []string
		cursor uint64
	)
	for {
		keys, next, err := s.rdb.Scan(ctx, cursor, globEscape(d.e.prefix)+"*", 1000).Result()
		if err != nil {
			d.add("keys", s.name, verdictWarn, "cannot SCAN: "+err.Error(), "run lockkit doctor as a user with +scan (the operator's user)")
			return
		}
		pipe := s.rdb.Pipeline()
		ttls := make([]*redis.DurationCmd, len(keys))
		for i, k := range keys {
			ttls[i] = pipe.PTTL(ctx, k)
		}
		if len(keys) > 0 {
			if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
				d.add("keys", s.name, verdictWarn, "cannot read TTLs: "+err.Error(), "run lockkit doctor as a user with +pttl")
				return
			}
		}
		for i, c := range ttls {
			if c.Val() == -1 {
				noTTL = append(noTTL, keys[i])
			}
		}
		seen += len(keys)
		cursor = next
		if cursor == 0 || seen >= limit {
			break
		}
	}
	value := fmt.Sprintf("%d keys under %s, %d without a TTL", seen, d.e.prefix, len(noTTL))
	if seen >= limit {
		value += fmt.Sprintf(" (the first %d looked at)", seen)
	}
	if len(noTTL) == 0 {
		d.add("keys", s.name, verdictOK, value, "")
		return
	}
	d.add("keys", s.name, verdictUnsafe, value+": "+strings.Join(noTTL[:min(3, len(noTTL))], " "),
		"lockkit writes none: another program writes under the prefix (give it its own) or a lock was set by hand; "+
			"a name whose key never expires can never be taken again")
}
