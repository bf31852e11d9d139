// Command cronreplicas runs N replicas of a service in one process, each with its own cron.Cron,
// Redis connection and lockkit client, all scheduling the same job every second with cronlock. Each
// replica's clock is skewed (spread over ±skew): its timer fires early or late by its skew and it
// reads the skewed clock. It prints one line per run, `tick=<RFC3339> replica=<n>`, then a summary;
// it exits with status 1 if a tick ran twice or was skipped.
//
// It needs no Redis: it starts an embedded server (miniredis, with TTLs that count down) unless
// -redis or REDIS_ADDR names a real one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/jobs/cronlock"
	"github.com/lockkit/lockkit/lockkittest"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

func main() {
	replicas := flag.Int("replicas", 5, "number of replicas")
	duration := flag.Duration("duration", 10*time.Second, "how long to run")
	addr := flag.String("redis", os.Getenv("REDIS_ADDR"), "address of a real Redis (embedded when empty)")
	skew := flag.Duration("skew", 300*time.Millisecond, "largest clock skew of a replica, either way (below 500ms)")
	flag.Parse()
	if *replicas < 1 || *duration < time.Second || *skew < 0 || *skew >= 500*time.Millisecond {
		fmt.Fprintln(os.Stderr, "cronreplicas: need -replicas >= 1, -duration >= 1s and 0 <= -skew < 500ms")
		os.Exit(2)
	}
	if err := run(os.Stdout, *replicas, *duration, *addr, *skew); err != nil {
		fmt.Fprintln(os.Stderr, "cronreplicas:", err)
		os.Exit(1)
	}
}

// skewed is the schedule as a replica whose clock is off by `by` follows it: its timer fires when
// its own clock reads an activation.
type skewed struct {
	s  cron.Schedule
	by time.Duration
}

func (k skewed) Next(t time.Time) time.Time { return k.s.Next(t.Add(k.by)).Add(-k.by) }

// tally counts runs per tick and skips per outcome.
type tally struct {
	out   io.Writer
	mu    sync.Mutex
	runs  map[int64]int
	skips map[string]int
}

func (t *tally) ran(tick time.Time, replica int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runs[tick.Unix()]++
	fmt.Fprintf(t.out, "tick=%s replica=%d\n", tick.UTC().Format(time.RFC3339), replica)
}

func (t *tally) event(ev cronlock.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch ev.Outcome {
	case cronlock.OutcomeRan:
	case cronlock.OutcomeDone, cronlock.OutcomeBusy:
		t.skips[ev.Outcome]++
	default:
		fmt.Fprintf(os.Stderr, "job %s tick %s: %s: %v\n", ev.Job, ev.Tick.Format(time.RFC3339), ev.Outcome, ev.Err)
	}
}

// run runs the replicas for duration and prints the runs and the summary to out.
func run(out io.Writer, n int, duration time.Duration, addr string, maxSkew time.Duration) error {
	if addr == "" {
		embedded, err := lockkittest.StartServer()
		if err != nil {
			return err
		}
		defer embedded.Close()
		addr = embedded.Addr()
		fmt.Fprintln(out, "embedded Redis at", addr)
	}
	t := &tally{out: out, runs: map[int64]int{}, skips: map[string]int{}}
	every := cronlock.Every(time.Second)
	type replica struct {
		c *cron.Cron
		l *cronlock.Locker
	}
	var reps []replica
	for i := range n {
		skew := time.Duration(0)
		if n > 1 {
			skew = -maxSkew + 2*maxSkew*time.Duration(i)/time.Duration(n-1)
		}
		rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
		defer rdb.Close()
		locks, err := core.New(rdb)
		if err != nil {
			return err
		}
		defer locks.Close(context.Background())
		l, err := cronlock.New(locks, cronlock.WithTTL(5*time.Second), cronlock.WithHook(t.event),
			cronlock.WithClock(func() time.Time { return time.Now().Add(skew) }))
		if err != nil {
			return err
		}
		job := func(ctx context.Context) error {
			tick, _ := cronlock.Tick(ctx)
			t.ran(tick, i+1)
			select { // some work: replicas firing meanwhile find the job busy, later ones find it done
			case <-time.After(200 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		c := cron.New(cron.WithSeconds())
		c.Schedule(skewed{every, skew}, l.Wrap("every-second", every)(cronlock.Func(job)))
		reps = append(reps, replica{c, l})
		fmt.Fprintf(out, "replica %d: clock skew %+v\n", i+1, skew)
	}
	for _, r := range reps {
		r.c.Start()
	}
	time.Sleep(duration)
	for _, r := range reps { // stop the timers, let running jobs finish, then stop the lockers
		<-r.c.Stop().Done()
		r.l.Stop()
	}
	return summary(t)
}

// summary prints the totals and fails if a tick ran twice or one was skipped.
func summary(t *tally) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ticks := slices.Sorted(func(yield func(int64) bool) {
		for k := range t.runs {
			if !yield(k) {
				return
			}
		}
	})
	runs, dups, skipped := 0, 0, 0
	for i, tick := range ticks {
		runs += t.runs[tick]
		dups += t.runs[tick] - 1
		if i > 0 {
			skipped += int(tick - ticks[i-1] - 1)
		}
	}
	fmt.Fprintf(t.out, "summary: ticks=%d runs=%d duplicates=%d skipped_ticks=%d (replica skips: busy=%d done=%d)\n",
		len(ticks), runs, dups, skipped, t.skips[cronlock.OutcomeBusy], t.skips[cronlock.OutcomeDone])
	if dups > 0 || skipped > 0 || len(ticks) == 0 {
		return errors.New("not exactly once per tick")
	}
	return nil
}
