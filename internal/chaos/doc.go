// Package chaos is lockkit's fault-injection suite. It holds no library code: the tests break real
// redis-server processes (and a real PostgreSQL) on purpose and measure what lockkit does, and the
// few helpers here (an in-process toxiproxy, the run report) exist for them.
//
// `go test ./internal/chaos/` runs a bounded version (CI runs it on every change);
// `LOCKKIT_CHAOS=full go test -race -run Chaos -v ./internal/chaos/` (make chaos) runs the full
// suite. Both print one table row per scenario: operations, faults injected, violations (must be
// 0), detection latency p50/p99 and the minimum safety margin. docs/reliability.md defines each
// figure and holds the latest full run.
package chaos
