// Package redisinfo reads what a Redis server's INFO reply says about lockkit's safety: whether
// the server may evict lockkit's keys. core (the eviction warning) and the lockkit command
// (lockkit doctor) share it, so the two cannot disagree. It imports only the standard library.
package redisinfo

import (
	"strconv"
	"strings"
)

// FixAnchor is the section of docs/troubleshooting.md that says how to stop a server from
// evicting lockkit's keys; the warning and lockkit doctor point to it.
const FixAnchor = "docs/troubleshooting.md#redis-may-evict-lock-keys"

// Info is an INFO reply: its "field:value" lines by field.
type Info map[string]string

// Parse reads an INFO reply (any sections). Section headers ("# Memory") and blank lines are
// skipped.
func Parse(reply string) Info {
	m := Info{}
	for line := range strings.Lines(reply) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

// Int returns a numeric field, and whether the reply had it.
func (i Info) Int(field string) (int64, bool) {
	n, err := strconv.ParseInt(i[field], 10, 64)
	return n, err == nil
}

// Eviction is what the memory section says about evicting lockkit's keys.
type Eviction struct {
	MaxMemory int64  // maxmemory, bytes; 0: no limit
	Policy    string // maxmemory_policy, e.g. noeviction, volatile-lru
	Used      int64  // used_memory, bytes
	Known     bool   // the reply had maxmemory and maxmemory_policy
}

// EvictionOf reads the eviction settings of an INFO memory reply.
func EvictionOf(i Info) Eviction {
	max, okMax := i.Int("maxmemory")
	used, _ := i.Int("used_memory")
	policy, okPolicy := i["maxmemory_policy"]
	return Eviction{MaxMemory: max, Policy: policy, Used: used, Known: okMax && okPolicy}
}

// Evicts reports whether the server may remove lockkit's keys to free memory: it has a memory
// limit and a policy other than noeviction. Every key lockkit writes has a TTL, so a volatile-*
// policy (the default of ElastiCache, Azure Cache for Redis and Memorystore) takes exactly them,
// and an allkeys-* policy takes them with the rest.
func (e Eviction) Evicts() bool {
	return e.Known && e.MaxMemory > 0 && e.Policy != "noeviction"
}

// Fix says what to change so that e no longer evicts lockkit's keys.
func (e Eviction) Fix() string {
	return "set maxmemory-policy noeviction (a parameter group or the service's console where CONFIG is blocked), " +
		"or keep the locks on a server of their own with noeviction; see " + FixAnchor
}
