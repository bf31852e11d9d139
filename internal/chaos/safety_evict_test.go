package chaos_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redisinfo"
	"github.com/redis/go-redis/v9"
)

// The eviction fault (issue #45), in the mixed-kinds variant: the one node becomes a managed
// Redis under memory pressure for a moment. It gets a memory limit just above what it uses and the
// volatile-lru policy (the default of ElastiCache, Azure and Memorystore) or volatile-ttl (which
// evicts the shortest TTLs first: held locks' keys), a fill of keys with a
// TTL pushes it over, and Redis evicts keys, lockkit's among them, as it chooses; then the fill is
// deleted and the limit lifted. Which keys Redis evicted is read from its keyspace notifications
// (evicted events, drained up to a marker published after the fill), and each evicted lockkit key
// is recorded as a key loss of its name and family over the whole fault (from the fill's start,
// before any eviction, to the limit's lifting, after the last).

// evictEvents is the channel of the evicted keys' events (db 0).
const evictEvents = "__keyevent@0__:evicted"

// evictMark ends the events of one eviction fault.
const evictMark = "chaos-evict-mark"

// evict injects one eviction fault through admin (on the test goroutine).
func (f *faultRig) evict(t *testing.T, admin *redis.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	sub := admin.Subscribe(ctx, evictEvents)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Logf("evict: subscribe: %v", err)
		return
	}
	from := f.h.now()
	mem, _ := admin.Info(ctx, "memory").Result()
	used := redisinfo.EvictionOf(redisinfo.Parse(mem)).Used
	admin.ConfigSet(ctx, "notify-keyspace-events", "Ee")
	policy := [...]string{"volatile-lru", "volatile-ttl"}[f.rnd.IntN(2)] // (volatile-ttl takes the shortest TTLs: held locks')
	admin.ConfigSet(ctx, "maxmemory-policy", policy)
	admin.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+(256<<10), 10))
	val := strings.Repeat("x", 8<<10)
	n := 64 + f.rnd.IntN(64) // 0.5 to 1 MB over the limit's margin of 256 kB
	pipe := admin.Pipeline()
	for i := range n {
		pipe.Set(ctx, fmt.Sprint("chaos-fill:", i), val, time.Minute)
	}
	_, _ = pipe.Exec(ctx) // (OOM once nothing volatile is left to evict)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("chaos-fill:", i)
	}
	admin.Del(ctx, keys...)
	admin.ConfigSet(ctx, "maxmemory", "0")
	to := f.h.now()
	admin.Publish(ctx, evictEvents, evictMark)
	lost := map[[2]string]bool{}
	for {
		m, err := sub.ReceiveMessage(ctx)
		if err != nil {
			f.h.addFault(span{Kind: "evict", Target: -1, From: from, To: to, Unsure: true, Detail: "events: " + err.Error()})
			return
		}
		if m.Payload == evictMark {
			break
		}
		if name, keys, ok := evictedKey(m.Payload); ok {
			lost[[2]string{name, keys}] = true
		}
	}
	for k := range lost {
		f.h.addFault(span{Kind: "evict", Target: -1, From: from, To: to, Name: k[0], Keys: k[1], Detail: policy})
	}
	f.h.count("evict-faults")
	for range lost {
		f.h.count("evicted-names")
	}
}

// evictedKey reads an evicted key: its name and family as a key loss records them ("lock" for the
// lock key, "permits" and "rw" for a family's keys, "" for any other key of the name, which
// excuses every hold of it), or not a lockkit key.
func evictedKey(key string) (name, keys string, ok bool) {
	rest, ok := strings.CutPrefix(key, "lockkit:{")
	if !ok {
		return "", "", false
	}
	name, tail, ok := strings.Cut(rest, "}")
	switch {
	case !ok:
		return "", "", false
	case tail == "":
		return name, "lock", true
	case strings.HasPrefix(tail, ":permits") && !strings.Contains(tail, ":queue"):
		return name, "permits", true
	case strings.HasPrefix(tail, ":rw") && !strings.Contains(tail, ":queue"):
		return name, "rw", true
	}
	return name, "", true
}
