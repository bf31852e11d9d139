package cronlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/jobs/cronlock"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

// Every replica runs the same code; each tick of "invoices" runs on one of them.
func ExampleLocker_Add() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	locker, err := cronlock.New(locks, cronlock.WithTTL(time.Minute), cronlock.WithLogger(slog.Default()))
	if err != nil {
		panic(err)
	}

	c := cron.New()
	if _, err := locker.Add(c, "*/5 * * * *", "invoices", func(ctx context.Context) error {
		tick, _ := cronlock.Tick(ctx)
		lock, _ := core.FromContext(ctx)
		fmt.Println("sending the invoices of", tick, "with fence", lock.Fence())
		return nil
	}); err != nil {
		panic(err)
	}
	c.Start()
	// ... until shutdown:
	ctx := c.Stop()
	locker.Stop() // cancel the context of a running job
	<-ctx.Done()
}

// Wrap is the cron.JobWrapper form, for jobs scheduled by hand; it needs the schedule.
func ExampleLocker_Wrap() {
	var locker *cronlock.Locker // from cronlock.New
	c := cron.New(cron.WithSeconds())
	every10s := cronlock.Every(10 * time.Second) // epoch-aligned, unlike cron.Every
	c.Schedule(every10s, locker.Wrap("heartbeat", every10s)(cronlock.Func(func(ctx context.Context) error {
		return nil
	})))
}

// A hook sees every firing: runs, skips and failures.
func ExampleWithHook() {
	var locks *core.Client // from core.New
	locker, err := cronlock.New(locks, cronlock.WithHook(func(ev cronlock.Event) {
		switch ev.Outcome {
		case cronlock.OutcomeFailed, cronlock.OutcomeLost, cronlock.OutcomeError:
			fmt.Println(ev.Job, ev.Tick, ev.Outcome, ev.Err)
		}
	}))
	_, _ = locker, err
}

func ExampleEvery() {
	s := cronlock.Every(time.Minute)
	// Every replica computes the same next tick, whenever it started.
	fmt.Println(s.Next(time.Date(2030, 1, 1, 12, 0, 42, 0, time.UTC)))
	fmt.Println(s.Next(time.Date(2030, 1, 1, 12, 0, 3, 0, time.UTC)))
	// Output:
	// 2030-01-01 12:01:00 +0000 UTC
	// 2030-01-01 12:01:00 +0000 UTC
}

// Tick gives the job the activation it runs for; cron itself does not.
func ExampleTick() {
	job := func(ctx context.Context) error {
		tick, ok := cronlock.Tick(ctx)
		if !ok {
			return fmt.Errorf("not run by a cronlock.Locker")
		}
		fmt.Println("report for", tick.Format(time.DateTime))
		return nil
	}
	_ = job
}

func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		panic(err)
	}
	// Derive ticks from the Redis server's clock: one round trip more per firing.
	locker, err := cronlock.New(locks, cronlock.WithRedisTime(rdb), cronlock.WithTTL(30*time.Second))
	if err != nil {
		panic(err)
	}
	_ = locker
}

// Leader mode: only the replica that leads the election "billing-cron" runs the schedule's jobs;
// the others skip every firing until it stops or loses leadership.
func ExampleWithLeader() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())
	e, err := election.New(locks, rdb, "billing-cron")
	if err != nil {
		panic(err)
	}
	locker, err := cronlock.New(locks, cronlock.WithLeader(e)) // starts campaigning
	if err != nil {
		panic(err)
	}
	c := cron.New()
	if _, err := locker.Add(c, "*/5 * * * *", "invoices", func(ctx context.Context) error {
		return nil // ctx is cancelled if this replica stops leading
	}); err != nil {
		panic(err)
	}
	c.Start()
	// ... until shutdown:
	ctx := c.Stop()
	locker.Stop() // resigns: another replica leads at once
	<-ctx.Done()
}

// A job that normally takes a few minutes on an hourly schedule: a run that hangs is cancelled
// after 20 minutes (the default would be the period, an hour) and the job's lock released.
func ExampleWithMaxHold() {
	var locks *core.Client // from core.New
	locker, err := cronlock.New(locks, cronlock.WithMaxHold(20*time.Minute))
	if err != nil {
		panic(err)
	}
	_ = locker
}
