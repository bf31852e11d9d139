// Package fenced holds the two resources of the fencing example: a Redis record written by a Lua
// script and a PostgreSQL row written by a conditional UPDATE. Both reject a write whose fencing
// token (core.Lock.Fence) is lower than one they have seen, so a holder that lost its lock without
// noticing (a long GC or VM pause, a SIGSTOP) cannot overwrite the work of the holder after it.
//
// A lock alone cannot stop a paused process: it checks its lock, pauses past the TTL, another
// process takes the lock and writes, and the first one resumes and writes too. Only the resource
// can tell, by comparing fences:
//
//	err := client.Do(ctx, "account-42", 10*time.Second, func(ctx context.Context) error {
//		l, _ := core.FromContext(ctx)
//		return account.Write(ctx, l.Fence(), newBalance) // fenced.ErrStale if a newer holder wrote
//	})
package fenced
