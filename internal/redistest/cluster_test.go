package redistest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
)

// keysOnEveryMaster returns one key per master, keyed by master address.
func keysOnEveryMaster(t *testing.T, c *redistest.Cluster) map[string]string {
	t.Helper()
	masters := c.Masters(t)
	keys := map[string]string{}
	for i := 0; len(keys) < len(masters); i++ {
		if i > 1000 {
			t.Fatalf("no key found for some master; have %v", keys)
		}
		key := fmt.Sprintf("lockkit:key%d", i)
		m := c.MasterOf(t, key)
		if _, ok := keys[m.Addr()]; !ok {
			keys[m.Addr()] = key
		}
	}
	return keys
}

func TestCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := redistest.StartCluster(t)
	t.Logf("StartCluster took %v", time.Since(start))

	if n := len(c.Addrs()); n != 6 {
		t.Fatalf("Addrs() has %d addresses", n)
	}
	if n := len(c.Nodes()); n != 6 {
		t.Fatalf("Nodes() has %d nodes", n)
	}
	masters := c.Masters(t)
	if len(masters) != 3 {
		t.Fatalf("Masters() has %d nodes", len(masters))
	}
	replicas := map[*redistest.Server]bool{}
	for _, m := range masters {
		r := c.ReplicaOf(t, m)
		if r == m || slices.Contains(masters, r) || replicas[r] {
			t.Fatalf("ReplicaOf(%s) = %s, not a distinct replica", m.Addr(), r.Addr())
		}
		replicas[r] = true
	}

	cc := c.Client(t)
	keys := keysOnEveryMaster(t, c)
	for addr, key := range keys {
		if err := cc.Set(ctx(t, 5*time.Second), key, addr, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
	for _, m := range masters {
		key := keys[m.Addr()]
		if got := m.Do(t, "GET", key); got != m.Addr() {
			t.Fatalf("GET %s on its master %s = %v", key, m.Addr(), got)
		}
	}

	t.Run("Failover", func(t *testing.T) {
		old := masters[0]
		key := keys[old.Addr()]
		replica := c.ReplicaOf(t, old)
		start := time.Now()
		c.Failover(t, old)
		t.Logf("Failover took %v", time.Since(start))
		if got := c.MasterOf(t, key); got != replica {
			t.Fatalf("MasterOf(%s) = %s after failover; want the replica %s", key, got.Addr(), replica.Addr())
		}
		if !slices.Contains(c.Masters(t), replica) || slices.Contains(c.Masters(t), old) {
			t.Fatalf("Masters() after failover does not contain the replica, or still has the old master")
		}
		if got := c.ReplicaOf(t, replica); got != old {
			t.Fatalf("ReplicaOf(new master) = %s; want the old master %s", got.Addr(), old.Addr())
		}
		got, err := cc.Get(ctx(t, 10*time.Second), key).Result()
		if err != nil || got != old.Addr() {
			t.Fatalf("GET %s after failover = %q, %v", key, got, err)
		}
		if err := cc.Set(ctx(t, 10*time.Second), key, "after", 0).Err(); err != nil {
			t.Fatalf("SET %s after failover: %v", key, err)
		}
		if got := replica.Do(t, "GET", key); got != "after" {
			t.Fatalf("GET %s on the new master = %v", key, got)
		}
	})

	t.Run("FailoverPausedMaster", func(t *testing.T) {
		old := c.MasterOf(t, keys[masters[1].Addr()])
		key := keys[masters[1].Addr()]
		replica := c.ReplicaOf(t, old)
		old.Pause(t)
		resumed := false
		defer func() { // a failure below must not leave the next subtests a paused node
			if !resumed && old.Paused() {
				old.Resume(t)
			}
		}()
		start := time.Now()
		c.Failover(t, old)
		t.Logf("Failover of a paused master took %v", time.Since(start))
		if got := c.MasterOf(t, key); got != replica {
			t.Fatalf("MasterOf(%s) = %s; want %s", key, got.Addr(), replica.Addr())
		}
		// The old client would keep sending the key's commands to the paused
		// master until it reloads the slot map; a new one asks the cluster. (A
		// new client may ask the paused node for the slot map first and wait for
		// its read timeout: try again, each attempt bounded.)
		cli := c.Client(t)
		var err error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			if err = cli.Set(ctx(t, 3*time.Second), key, "paused", 0).Err(); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("SET %s after failover of a paused master: %v", key, err)
		}
		old.Resume(t)
		resumed = true
		start = time.Now()
		c.WaitHealthy(t)
		t.Logf("WaitHealthy after Resume took %v", time.Since(start))
		if got := c.ReplicaOf(t, replica); got != old {
			t.Fatalf("ReplicaOf(new master) = %s; want the resumed old master %s", got.Addr(), old.Addr())
		}
	})

	t.Run("RestartKilledNode", func(t *testing.T) {
		m := c.Masters(t)[2]
		key := keys[masters[2].Addr()]
		replica := c.ReplicaOf(t, m)
		m.Kill(t)
		c.Failover(t, m) // FORCE, or Redis' own failover
		if got := c.MasterOf(t, key); got != replica {
			t.Fatalf("MasterOf(%s) = %s; want %s", key, got.Addr(), replica.Addr())
		}
		if err := c.Client(t).Set(ctx(t, 10*time.Second), key, "killed", 0).Err(); err != nil {
			t.Fatalf("SET %s after failover of a killed master: %v", key, err)
		}
		m.Restart(t)
		c.WaitHealthy(t)
		if got := c.ReplicaOf(t, replica); got != m {
			t.Fatalf("ReplicaOf(new master) = %s; want the restarted node %s", got.Addr(), m.Addr())
		}
	})
}

func TestClusterWithPasswordAndTLS(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.WithPassword("pw"), redistest.WithTLS())
	o := c.ClusterOptions()
	if o.Password != "pw" || o.TLSConfig == nil {
		t.Fatalf("ClusterOptions() password %q, TLS %v", o.Password, o.TLSConfig != nil)
	}
	cc := c.Client(t)
	for i := range 20 {
		if err := cc.Set(ctx(t, 5*time.Second), fmt.Sprintf("lockkit:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	m := c.Masters(t)[0]
	c.Failover(t, m)
	if err := cc.ForEachShard(ctx(t, 10*time.Second), func(ctx context.Context, cl *redis.Client) error {
		return cl.Ping(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
}

func TestClusterWithACL(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.WithACL("user default off", "user app on >pw ~lockkit:* &* +@all"))
	cc := c.Client(t)
	if err := cc.Set(ctx(t, 5*time.Second), "lockkit:a", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cc.Set(ctx(t, 5*time.Second), "other:a", 1, 0).Err(); err == nil {
		t.Fatal("SET other:a as app succeeded")
	}
}
