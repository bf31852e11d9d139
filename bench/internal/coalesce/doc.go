// Package coalesce is a benchmark prototype for issue #31, not used by lockkit itself: a sender
// that lets a lone caller's command go straight out on a plain go-redis client and hands it to
// go-redis's automatic pipeliner only while other commands are in flight.
//
// go-redis's AutoPipeliner has no "only when busy" switch: even an idle shard sends a lone
// command through its flusher goroutine and a dispatch goroutine (two hand-offs and a goroutine
// start), which costs a lone caller about a quarter of its throughput on a loaded 2-core machine.
// Sender keeps an in-flight count and pays the pipeliner's hand-offs only when there is something
// to coalesce with.
//
// Two faces, as in go-redis:
//
//   - Blocking (the default) waits on AutoPipeline()'s blocking face, which does not watch the
//     command's context: a queued command is waited for until its batch returns (bounded by the
//     client's read/write timeouts and retries), whatever the caller's deadline.
//   - ContextBound waits on AsyncAutoPipeline()'s deferred face with AutoFuture.WaitContext, so the
//     caller's context bounds its wait. The command may still run after Process returned the
//     context's error (its reply is then "lost" to the caller); its result accessors (Err, Val,
//     Result) block until it has run, so a caller can learn its outcome later, e.g. to give back
//     a lock whose acquisition it abandoned.
//
// Commands that must not ride a shared pipeline connection (WAIT, blocking commands, SUBSCRIBE,
// MULTI, ...) are diverted by go-redis itself to a pooled connection of their own; Sender does not
// change that, so WAIT after a write through Sender does not count that write's replicas.
package coalesce
