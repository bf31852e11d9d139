// Package gocronlock runs go-co-op/gocron v2 jobs on several replicas with lockkit: a Locker
// whose NewJob adds jobs of which each run runs once across the replicas, and a gocron.Elector
// under which one replica, the leader, runs them all.
//
// # Locker: each run once
//
// Every replica schedules the same jobs on its own gocron.Scheduler and adds them through its
// Locker:
//
//	locks, _ := core.New(rdb)
//	locker, err := gocronlock.NewLocker(locks)
//	...
//	s, _ := gocron.NewScheduler() // no gocron.WithDistributedLocker: see below
//	_, err = locker.NewJob(s, gocron.CronJob("*/5 * * * *", false), "invoices", func(ctx context.Context) error {
//		run, _ := gocronlock.Tick(ctx) // the activation this run is for, e.g. 10:05:00
//		return sendInvoices(ctx, run)
//	})
//	s.Start()
//	...
//	_ = s.Shutdown()
//
// gocron asks a locker for a lock on the job's name before each run and leaves "time splay
// between schedulers" to it: a replica whose clock runs behind fires the same run later, after
// the first replica finished it and released the lock, and a lock on the name alone lets it run
// the run again. The Locker locks per run instead, with the exactly-once layer that cronlock's
// tick markers use:
//
//   - The lock NewJob installs on the job names the run by the job's activation nearest to the
//     replica's clock (WithClock, the scheduler's clock). gocron fires a run when that clock reads the activation, so the name is
//     the activation itself on every replica, whatever the skew between their clocks: only the
//     scheduler's dispatch delay separates the two, and a run more than half a second (or half the
//     period of a shorter DurationJob) from an activation is refused with ErrOffSchedule instead
//     of being guessed. NewJob reads the activations from the job's definition, as gocron does
//     (gocron.Job.Schedule), and starts a DurationJob on a multiple of its period since the Unix
//     epoch, so that replicas started at different moments agree on its runs.
//   - The replica that takes the job's lock (one TryAcquire, one round trip) runs the job; the
//     lock is guarded by the run's completion marker (core.WithGuard), so a replica that fires
//     after the run finished gets ErrDone in that same round trip, and one that fires while it
//     runs gets ErrBusy. gocron skips the run there and reports the error to AfterLockError.
//   - Unlock releases the lock and writes the marker in one script (core.Lock.ReleaseSet). The
//     marker stays until WithMaxSkew (default one minute) plus the firing window (half a second,
//     less for a shorter DurationJob) after the activation: a replica fires for a run only while
//     its clock is within the window of the activation, so a replica whose clock lags by at most
//     WithMaxSkew finds the marker whenever it fires.
//   - While the job runs, core's watchdog renews the lock. WithTTL (default 30s) is how long a
//     replica that dies mid-run blocks the job. WithMaxHold bounds a run that hangs (default the
//     larger of the job's period and the TTL); it then gets no marker. The job gets the lock's
//     context, cancelled if the lock is lost, the maximum hold passes or gocron stops the job, and
//     core.FromContext(ctx).Fence() is a fencing token that grows with every run.
//
// gocron passes a job only its own context, never the lock's, and wraps no job function of its
// own: that is why jobs are added with NewJob, which registers the job's schedule with the Locker
// and wraps the function so that it runs under the lock's context.
//
// For the same reason a *Locker is no gocron.Locker: gocron's own options,
// gocron.WithDistributedLocker(locker) on a scheduler and gocron.WithDistributedJobLocker(locker)
// on a job added with s.NewJob, would pass it only the job's name, from which no replica can tell
// which run is due (nor align a DurationJob that each replica started at its own moment), so no
// such job could run once per run; they do not compile with a *Locker. Add every job that must
// run once per run with NewJob; jobs added with s.NewJob run on every replica.
//
// gocron reports a refused run only to the job's AfterLockError listener. The Locker logs every
// refusal too (WithLogger; slog.Default() by default): ErrDone and ErrBusy, a replica's ordinary
// share of the runs, at Debug; ErrOffSchedule, ErrNotLocked and Redis failures at Error.
//
// What "every run exactly once" assumes, and what breaks it:
//
//   - Every replica uses the same job name and definition, and the Locker's clock and location
//     are those of its scheduler. A wrong location shows as every run failing with ErrOffSchedule.
//   - No replica's clock lags the fastest by more than WithMaxSkew. A larger lag lets the lagging
//     replica run a run again once the marker has expired.
//   - A lock lost while the job ran (Redis failed over without the lock, renewals failed past the
//     TTL) or a run cut by the maximum hold writes no marker: another replica may run the run
//     again. A failed run is marked ("failed") and not run again.
//   - A run is missed when no live replica fires for it while the job's lock is free: when Redis
//     is unreachable from all of them, or a run of the job outlasts its period everywhere (the
//     lock is per job: two runs of one job never overlap across the replicas).
//   - WithStartImmediately (OneTimeJobStartImmediately), DurationRandomJob, "@every" crontabs and
//     intervals above 1, Job.RunNow, WithIntervalFromCompletion and a run queued behind a
//     LimitModeWait limit past the window produce runs that the replicas cannot match: NewJob
//     rejects the definitions and the immediate start (ErrInvalid), the lock refuses the runs
//     (ErrOffSchedule, logged at Error). Crontabs are read by gocron's own parser; in a daylight-saving gap a
//     DailyJob's shifted run is refused.
//
// # Elector: one leader runs everything
//
// An Elector campaigns in a package election election (Start, Stop); gocron calls IsLeader before
// each run and skips the run unless this replica leads. The term is a lockkit lock renewed by the
// watchdog: a leader that stalls loses it, and its term's context ends before another replica can
// lead (the fence), so IsLeader fails from that moment on. Jobs wrapped by Task run under the
// term's context and see the end at once. An Elector writes no marker: a run can run twice when
// leadership changes hands within the clock skew of that run, and runs that fall while nobody
// leads (up to the election's TTL after a leader died) are not run. The Locker has neither gap.
//
// # Keys
//
// A job's lock lives in namespace "gocron" (see core.InNamespace), which no name taken from client
// input can reach. With the default prefix "lockkit:", a job named JOB uses:
//
//	lockkit:{@gocron/JOB}            the job's lock (core), while a run is in progress
//	lockkit:gocron:{@gocron/JOB}:MS  the completion marker of the run whose activation is MS, in
//	                                 Unix milliseconds: an exactly-once record, "ok" or "failed";
//	                                 TTL until WithMaxSkew + the window after the activation, at
//	                                 least 1s
//
// The Elector's keys are package election's. Every key expires.
package gocronlock
