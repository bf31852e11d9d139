package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/jobs/gocronlock"
	"github.com/redis/go-redis/v9"
)

// Every replica runs the same code; each run of "invoices" runs on one of them, once.
func ExampleNewLocker() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
	locker, err := gocronlock.NewLocker(locks, gocronlock.WithTTL(time.Minute))
	if err != nil {
		log.Fatal(err)
	}

	// The scheduler gets no locker of its own: a *Locker is no gocron.Locker (gocron would pass it
	// only the job's name, which names no run). NewJob installs its lock on the job.
	s, err := gocron.NewScheduler()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := locker.NewJob(s, gocron.CronJob("*/5 * * * *", false), "invoices", func(ctx context.Context) error {
		run, _ := gocronlock.Tick(ctx) // the same activation on every replica
		lock, _ := core.FromContext(ctx)
		fmt.Println("sending the invoices of", run, "with fence", lock.Fence())
		return sendInvoices(ctx, run) // ctx ends if the lock is lost
	}); err != nil {
		log.Fatal(err)
	}
	s.Start()
	// ... until shutdown: running jobs' contexts are cancelled, their runs marked done.
	_ = s.Shutdown()
}

func sendInvoices(context.Context, time.Time) error { return nil }

// gocron reports why a replica skipped a run to the job's AfterLockError listener (the Locker
// logs it too: ErrDone and ErrBusy at Debug, anything else at Error). A job that starts
// immediately is refused: that run would be each replica's own.
func ExampleLocker_NewJob() {
	var locker *gocronlock.Locker // from gocronlock.NewLocker
	var s gocron.Scheduler        // from gocron.NewScheduler
	_, err := locker.NewJob(s, gocron.DurationJob(10*time.Second), "heartbeat", func(ctx context.Context) error {
		return nil // runs at :00, :10, :20... on one replica: NewJob aligns the job to the epoch
	}, gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, name string, err error) {
		switch {
		case errors.Is(err, gocronlock.ErrDone), errors.Is(err, gocronlock.ErrBusy):
			// another replica ran the run, or runs it now
		default:
			log.Printf("job %s: run skipped: %v", name, err)
		}
	})))
	if err != nil {
		log.Fatal(err)
	}

	_, err = locker.NewJob(s, gocron.DurationJob(time.Minute), "warmup", func(ctx context.Context) error {
		return nil
	}, gocron.WithStartAt(gocron.WithStartImmediately()))
	fmt.Println(errors.Is(err, core.ErrInvalid)) // true: NewJob refuses an immediate start
}

// One replica, the leader, runs every job; a leader that stalls is deposed and its jobs' contexts
// end before another replica leads.
func ExampleNewElector() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)
	e, err := election.New(locks, rdb, "scheduler")
	if err != nil {
		log.Fatal(err)
	}
	elector, err := gocronlock.NewElector(e)
	if err != nil {
		log.Fatal(err)
	}
	if err := elector.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer elector.Stop(ctx) // resigns: another replica leads at once

	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.NewJob(gocron.DurationJob(time.Minute), elector.Task(func(ctx context.Context) error {
		term, _ := core.FromContext(ctx) // the leadership lock: its fence is the term's
		return reindex(ctx, term.Fence())
	})); err != nil {
		log.Fatal(err)
	}
	s.Start()
	// ... until shutdown:
	_ = s.Shutdown()
}

func reindex(context.Context, int64) error { return nil }

// Tick gives a job the activation it runs for; gocron itself does not.
func ExampleTick() {
	job := func(ctx context.Context) error {
		run, ok := gocronlock.Tick(ctx)
		if !ok {
			return errors.New("not run by a gocronlock.Locker")
		}
		fmt.Println("closing the books of", run.Add(-24*time.Hour).Format(time.DateOnly))
		return nil
	}
	_ = job
}
