package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// evictTTL is the holds' TTL in the eviction tests: renewals every 300 ms.
const evictTTL = 900 * time.Millisecond

// hold is a held lock, permit, read, write or set, by its context.
type hold struct {
	ctx  context.Context
	keys string // the pattern of its keys
	key  string // the key that holds it (docs/keys.md)
}

// holdEach takes one hold of each kind on its own name.
func holdEach(t *testing.T, c *core.Client) map[string]hold {
	ctx := context.Background()
	holds := map[string]hold{}
	suffix := map[string]string{"read": ":rw", "write": ":rw", "permit": ":permits"}
	for kind, opts := range map[string][]core.AcquireOption{"lock": nil, "fair": {core.Fair()}, "read": {core.Read()},
		"write": {core.Write()}, "permit": {core.Permits(3)}} {
		l, err := c.Acquire(ctx, "evicted-"+kind, evictTTL, opts...)
		if err != nil {
			t.Fatal(kind, err)
		}
		holds[kind] = hold{l.Context(), "lockkit:{evicted-" + kind + "}*", "lockkit:{evicted-" + kind + "}" + suffix[kind]}
	}
	s, err := c.AcquireAll(ctx, []string{"evicted-set-a", "evicted-set-b"}, evictTTL)
	if err != nil {
		t.Fatal(err)
	}
	holds["set"] = hold{s.Context(), "lockkit:{evicted-set-b}*", "lockkit:{evicted-set-b}"} // (one name of the set is enough)
	return holds
}

// lostWithin waits for each hold's context and checks that it ended with ErrLost within one
// renewal interval (TTL/3) of since, plus slack for a loaded host.
func lostWithin(t *testing.T, holds map[string]hold, since time.Time, slack time.Duration) {
	for kind, h := range holds {
		select {
		case <-h.ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not ended 10 s after its keys were evicted", kind)
		}
		took := time.Since(since)
		if cause := context.Cause(h.ctx); !errors.Is(cause, core.ErrLost) {
			t.Errorf("%s: ended with %v, want ErrLost", kind, cause)
		}
		if took > evictTTL/3+slack {
			t.Errorf("%s: lost %v after the eviction, want within a renewal interval (%v) + %v", kind, took, evictTTL/3, slack)
		}
		t.Logf("%s: lost %v after the eviction", kind, took.Round(time.Millisecond))
	}
}

// keysOf returns the keys matching pattern.
func keysOf(t *testing.T, rdb *redis.Client, pattern string) []string {
	keys, err := rdb.Keys(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// A hold of each kind whose keys are removed by the server (as an eviction does: DEL, here) ends
// with ErrLost within one renewal interval.
func TestEviction_everyKindLost(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	c := locktest.NewClient(t, srv.Client(t))
	holds := holdEach(t, c)
	start := time.Now()
	for kind, h := range holds {
		keys := keysOf(t, admin, h.keys)
		if admin.Exists(context.Background(), h.key).Val() != 1 {
			t.Fatalf("%s: no key %s", kind, h.key)
		}
		if len(keys) == 0 {
			t.Fatalf("%s: no key matches %s", kind, h.keys)
		}
		admin.Del(context.Background(), keys...)
	}
	lostWithin(t, holds, start, 400*time.Millisecond)
}

// On a real server with maxmemory and volatile-lru, filled with keys that have a TTL, Redis evicts
// held locks' keys, and each such hold ends with ErrLost within a renewal interval of its eviction.
func TestEviction_realEvictionLost(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru",
		"--maxmemory-samples", "10"))
	admin := srv.Client(t)
	c := locktest.NewClient(t, srv.Client(t))
	holds := holdEach(t, c)
	ctx := context.Background()
	val := strings.Repeat("x", 16<<10)
	gone := map[string]time.Time{}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; len(gone) < len(holds) && time.Now().Before(deadline); i++ {
		if err := admin.Set(ctx, fmt.Sprint("fill:", i), val, time.Hour).Err(); err != nil && !strings.HasPrefix(err.Error(), "OOM") {
			t.Fatal(err)
		}
		for kind, h := range holds {
			if _, ok := gone[kind]; !ok && admin.Exists(ctx, h.key).Val() == 0 {
				gone[kind] = time.Now()
			}
		}
	}
	if len(gone) == 0 {
		t.Fatal("the fill evicted no held lock's key in 20 s")
	}
	for kind := range holds {
		at, ok := gone[kind]
		if !ok {
			t.Logf("%s: its key was not evicted", kind)
			delete(holds, kind)
			continue
		}
		lostWithin(t, map[string]hold{kind: holds[kind]}, at, 400*time.Millisecond)
	}
	locktest.Eventually(t, time.Second, "the eviction counted", func() bool {
		return strings.Contains(fmt.Sprint(srv.Do(t, "INFO", "stats")), "evicted_keys:")
	})
}
