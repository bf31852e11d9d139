// Package cronlock wraps robfig/cron/v3 jobs so that each scheduled tick of a job runs once across
// all replicas, without a leader election.
//
// Every replica schedules the same jobs on its own cron.Cron; a Locker decides, per tick, which one
// runs it:
//
//	locks, _ := core.New(rdb)
//	locker, err := cronlock.New(locks, cronlock.WithTTL(time.Minute), cronlock.WithLogger(slog.Default()))
//	...
//	c := cron.New()
//	_, err = locker.Add(c, "*/5 * * * *", "invoices", func(ctx context.Context) error {
//		tick, _ := cronlock.Tick(ctx) // the activation this run is for, e.g. 10:05:00
//		return sendInvoices(ctx, tick)
//	})
//	c.Start()
//	...
//	ctx := c.Stop()
//	locker.Stop() // cancels running jobs' contexts
//	<-ctx.Done()
//
// Locking on the job name alone, as ShedLock and gocron do, lets a replica whose clock is a little
// behind, or whose timer fired late, run a tick that a faster replica has just finished. cronlock
// locks on the job and the tick instead:
//
//   - The tick is derived from the job's schedule: it is the activation nearest to the replica's
//     clock when the job fires. A late timer or a clock skewed by less than half the gap between two
//     activations (500 ms on a one-second schedule, 30 s on a minute schedule) names the same tick
//     on every replica. WithRedisTime reads the Redis server's clock instead of the local one, at the
//     cost of one more round trip per firing.
//   - The replica that takes the job's lock (one TryAcquire, one round trip) runs the job; the
//     others skip the tick, reported as OutcomeBusy. When the run ends, the lock is released and a
//     completion marker for the tick written in the same script, so that a replica firing later for
//     the same tick skips it (OutcomeDone) in one round trip too: the acquire checks the marker
//     (core.WithGuard). The marker stays until one gap after the next tick: ShedLock's
//     lockAtLeastFor, sized by the schedule.
//   - While the job runs, core's watchdog renews the lock. WithTTL (default 30s) is how long a
//     replica that dies mid-run blocks the job; then the next tick runs normally. WithMaxHold
//     (ShedLock's lockAtMostFor; default the larger of the schedule's period and the TTL) ends a run
//     that hangs on a live replica: its context is cancelled with core.ErrMaxHold and the lock
//     released (OutcomeMaxHold, no marker). The job gets the lock's context, cancelled if the lock is
//     lost (OutcomeLost, no marker), the maximum hold passes or the Locker is stopped;
//     core.FromContext(ctx).Fence() is a fencing token that grows with every run.
//   - Errors and panics of the job are reported (WithHook, and the logger: WithLogger, by default
//     slog.Default(), at Error; runs and skips at Debug) and never reach the scheduler. The marker is written for a failed run too, so that a tick runs at most once;
//     RetryOnError leaves the tick to a replica that fires for it later instead.
//   - "@every" specs given to Add are aligned to the Unix epoch (see Every), so that replicas started
//     at different moments agree on the ticks; cron.Every counts from each replica's start.
//
// The lock is per job, not per tick: two runs of one job never overlap across the replicas, and a
// tick that fires while a run of an earlier tick is still going is skipped as busy, as with
// cron.SkipIfStillRunning on one machine.
//
// Use Add to register a func(ctx) error, or Wrap as a cron.JobWrapper when you schedule the job
// yourself; Wrap needs the job's schedule to derive its ticks.
//
// # Leader mode
//
// WithLeader makes one replica, the leader of a package election election, run every job of the
// Locker, and the others skip (OutcomeFollower): one lock for the whole schedule instead of one
// per tick. Compared with the default:
//
//   - Cost: no Redis round trip per firing (the default costs one per replica and firing, plus the
//     marker's write), only the election lock's renewal, whatever the number of jobs and ticks.
//     Worth it for many jobs or sub-second schedules.
//   - Placement: every job runs on the leader, so jobs do not spread over the replicas, and a job
//     may keep in-process state from one run to the next (a cursor, a cache).
//   - Failover: a leader that stops resigns and another replica leads at once; one that dies or
//     hangs in every goroutine leads until the election's TTL runs out (default 10s). Ticks that
//     fall in that gap are not run at all, whereas per-tick locking runs each tick on any replica
//     alive at that moment (a dead replica blocks only the job it was running, for its TTL).
//   - At most once per tick: per-tick locking writes a completion marker, so a replica with a
//     skewed clock or a late timer never runs a tick again. Leader mode writes none: a tick can
//     run twice when leadership changes hands within the clock skew of that tick.
//   - Loss: the leader's running jobs get the term's context, cancelled (OutcomeLost) before
//     another replica can lead; core.FromContext(ctx).Fence() is the term's fence, the same for
//     every run of a term and larger than every earlier term's.
//   - A run that hangs: in both modes WithMaxHold cancels its context; per-tick locking also
//     releases the job's lock so that another replica can run the next tick, while in leader mode
//     the job stays busy on the leader until the run returns (other jobs are not affected).
//
// # Keys
//
// A job's lock lives in cronlock's core namespace (WithNamespace, default "cron"), so nothing that
// takes names from clients (an HTTP path value, a gRPC key, a task key) can hold it. The tick markers
// are records of lockkit's exactly-once layer (the one under httpmw's and grpcmw's idempotent
// replay): the tick's fingerprint and "ok" or "failed". With the default prefix "lockkit:", a job
// named JOB uses:
//
//	lockkit:{@cron/JOB}             the job's lock (core): held while a run is in progress, kept
//	                                free 10 s after it (with the fence)
//	lockkit:cron:{@cron/JOB}:TICK   the completion marker of a tick: TICK in Unix seconds; TTL until
//	                                one gap after the next tick
//
// (docs/keys.md describes every key.)
//
// Markers written before the namespace was introduced (lockkit:cron:{cron/JOB}:TICK, value "ok")
// are not read: during a rolling upgrade a tick may run once on an old replica and once on a new
// one.
//
// Ticks are identified by their Unix second, so a schedule must not fire twice within a second
// (none of robfig/cron's do). All keys follow the core.Client's prefix (core.WithPrefix). Skips are
// visible in core's instrumentation too: a busy tick is a "contended"
// TryAcquire, a done one a "guarded" one.
package cronlock
