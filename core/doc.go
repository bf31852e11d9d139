// Package core is lockkit's distributed lock on Redis.
//
// A Client takes named locks with a TTL on one Redis server (plain, Sentinel or Cluster client) or,
// (see NewRedlock) on a quorum of independent servers:
//
//   - Acquire waits for the lock without polling: the holder's release wakes the next waiter through
//     one shared pub/sub subscription; TryAcquire tries once. Both cost one round trip when the lock
//     is free.
//   - A held Lock carries a fencing token (Fence) that strictly increases with every acquisition,
//     and a context (Context) that is cancelled when the lock is released or lost.
//   - A watchdog renews every held lock at a third of its TTL, in pipelined batches. If Redis says
//     the lock is not ours any more, or renewals fail until the local validity deadline (the send
//     time plus TTL minus drift), the lock's context is cancelled before Redis can give the lock to
//     anyone else.
//   - Locks are reentrant: acquiring with a lock's context, or WithOwner and its token, re-enters it.
//   - Release is an owner-checked Lua script; it never deletes somebody else's lock.
//   - WithMaxHold (or a Client's WithDefaultMaxHold) ends a hold after a hard limit even while
//     renewals succeed, so that a hung holder cannot keep everyone out for ever.
//   - Inspect reads who holds a lock (a digest of the token, host, pid, WithLabel, since when),
//     its TTL, fence and fair waiters; ForceRelease is the operator's way to end a stuck hold. The
//     lockkit command (cmd/lockkit) does both from a shell.
//   - Permits(n) turns an acquisition into one of n permits of a counting semaphore: a held permit
//     is a Lock with its own lease, renewal, context, fence and release (docs/guarantees.md).
//   - The Client coalesces its commands into pipelines (go-redis's automatic pipelining) while
//     many are in flight at once; a lone caller's commands still go straight out. On by default;
//     WithPipelining(0) turns it off (docs/topologies.md).
//   - Read and Write take the shared or the exclusive side of a read-write lock: many readers or
//     one writer, served first come first served (a stream of readers cannot starve a writer), each
//     hold a Lock with its own lease, context and fence; reads nest in a write through its context.
//
// The Redis keys and channels a Client writes, with their types and lifetimes, are listed in
// docs/keys.md, the one description of the schema (a test checks it against the keys a workload
// leaves); the ACL a Redis user needs for them is in docs/security.md.
//
// Instrumentation plugs in through Hook; package lockotel (github.com/lockkit/lockkit/otel/lockotel)
// provides OpenTelemetry tracing and metrics.
package core
