// Package store is core's Redis machinery: the key names of a lock (Keys, docs/keys.md), the
// Store seam between the hold lifecycle and Redis, and its two implementations: Node, over one
// go-redis client (plain, Sentinel or Cluster; with WithReplicaAck's WAIT), and Redlock, which fans
// each call out to independent nodes and counts a quorum. Every call is one script of
// core/internal/script. It knows nothing of Locks, contexts of holds or the watchdog: core asks,
// the store answers what Redis said.
package store
