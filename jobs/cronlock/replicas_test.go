package cronlock_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/cronlock"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

// skewed is the schedule as seen by a replica whose clock is off by `by`: its timer fires when its
// own clock reads an activation, i.e. `by` early (by > 0) or late (by < 0) in real time.
type skewed struct {
	s  cron.Schedule
	by time.Duration
}

func (k skewed) Next(t time.Time) time.Time { return k.s.Next(t.Add(k.by)).Add(-k.by) }

// runLog records which replica ran which tick.
type runLog struct {
	mu   sync.Mutex
	runs map[int64][]int // Unix tick -> replicas
}

func (r *runLog) add(tick time.Time, replica int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = map[int64][]int{}
	}
	r.runs[tick.Unix()] = append(r.runs[tick.Unix()], replica)
}

func (r *runLog) snapshot() map[int64][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[int64][]int, len(r.runs))
	for k, v := range r.runs {
		m[k] = slices.Clone(v)
	}
	return m
}

// checkOncePerTick fails unless every tick ran exactly once and the ticks are contiguous seconds.
func checkOncePerTick(t *testing.T, runs map[int64][]int) []int64 {
	t.Helper()
	ticks := slices.Sorted(func(yield func(int64) bool) {
		for k := range runs {
			if !yield(k) {
				return
			}
		}
	})
	for i, tick := range ticks {
		if n := len(runs[tick]); n != 1 {
			t.Errorf("tick %d ran %d times, by replicas %v", tick, n, runs[tick])
		}
		if i > 0 && tick != ticks[i-1]+1 {
			t.Errorf("ticks %d..%d skipped", ticks[i-1]+1, tick-1)
		}
	}
	return ticks
}

// TestReplicas_everyTickRunsOnce runs five replicas, each with its own cron.Cron, go-redis client and
// core.Client, clocks skewed by up to ±300 ms, on a job that fires every second for about 10 s. Two
// replicas model a skewed machine completely (their timers fire 300 ms early or late in real time);
// the others fire on time and read a skewed clock. The usual winner is stopped halfway.
func TestReplicas_everyTickRunsOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	sched := mustParse(t, "* * * * * *")
	replicas := []struct {
		skew time.Duration
		wrap bool // schedule with Wrap and a skewed timer; else Add
	}{{-300 * time.Millisecond, true}, {-300 * time.Millisecond, false}, {0, false}, {300 * time.Millisecond, false}, {300 * time.Millisecond, true}}
	const first = 4 // fires first: 300 ms early
	var log runLog
	evs := make([]*events, len(replicas))
	crons := make([]*cron.Cron, len(replicas))
	lockers := make([]*cronlock.Locker, len(replicas))
	firstRan := make(chan struct{}, 100)
	for i, r := range replicas {
		skew := r.skew
		evs[i] = &events{}
		hook := func(ev cronlock.Event) {
			// A skip is reported right after the firing: the tick must be the activation the
			// replica's clock is at, give or take the skew and a late timer.
			if ev.Outcome != cronlock.OutcomeRan {
				if d := time.Now().Add(skew).Sub(ev.Tick).Abs(); d > 450*time.Millisecond {
					t.Errorf("replica %d (skew %v) reported tick %v %v away from its clock", i, skew, ev.Tick, d)
				}
			}
			evs[i].hook(ev)
			if i == first && ev.Outcome == cronlock.OutcomeRan {
				firstRan <- struct{}{}
			}
		}
		lockers[i] = newLocker(t, locktest.NewClient(t, srv.Client(t)), cronlock.WithTTL(5*time.Second), cronlock.WithHook(hook),
			cronlock.WithClock(func() time.Time { return time.Now().Add(skew) }))
		job := func(ctx context.Context) error {
			tick, ok := cronlock.Tick(ctx)
			if !ok {
				return fmt.Errorf("no tick in the job's context")
			}
			log.add(tick, i)
			select { // work long enough that replicas firing on time find the lock busy
			case <-time.After(400 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		crons[i] = cron.New(cron.WithSeconds())
		if r.wrap {
			crons[i].Schedule(skewed{sched, skew}, lockers[i].Wrap("report", sched)(cronlock.Func(job)))
		} else if _, err := lockers[i].Add(crons[i], "* * * * * *", "report", job); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range crons {
		c.Start()
	}
	stopped := map[int]bool{}
	defer func() {
		for i, c := range crons {
			if !stopped[i] {
				stopCron(t, c, lockers[i])
			}
		}
	}()
	// Stop the usual winner right after its fifth run, between two of its runs.
	for range 5 {
		select {
		case <-firstRan:
		case <-time.After(10 * time.Second):
			t.Fatal("the first replica did not run five ticks in 10s")
		}
	}
	stopCron(t, crons[first], lockers[first])
	stopped[first] = true
	locktest.Eventually(t, 10*time.Second, "ten ticks", func() bool { return len(log.snapshot()) >= 10 })
	for i, c := range crons {
		if !stopped[i] {
			stopCron(t, c, lockers[i])
			stopped[i] = true
		}
	}

	ticks := checkOncePerTick(t, log.snapshot())
	t.Logf("ticks %d..%d ran once each", ticks[0], ticks[len(ticks)-1])
	outcomes := map[string]int{}
	ran := map[int64]int{}
	for i := range replicas {
		for _, ev := range evs[i].all() {
			outcomes[ev.Outcome]++
			if ev.Outcome == cronlock.OutcomeRan {
				ran[ev.Tick.Unix()]++
			}
			if ev.Err != nil || ev.Tick.Nanosecond() != 0 {
				t.Errorf("replica %d: %+v", i, ev)
			}
		}
	}
	for _, tick := range ticks {
		if ran[tick] != 1 {
			t.Errorf("tick %d: %d ran events, want 1", tick, ran[tick])
		}
	}
	// Both ways of skipping were exercised: the lock held by the runner, and its completion marker.
	if outcomes[cronlock.OutcomeDone] == 0 || outcomes[cronlock.OutcomeBusy] == 0 {
		t.Errorf("outcomes %v: want done and busy skips", outcomes)
	}
	t.Logf("outcomes %v", outcomes)
}

const (
	childEnv = "CRONLOCK_TEST_CHILD_REDIS" // set: the test binary runs a replica (runChildReplica)
	childTTL = 2 * time.Second
)

// runChildReplica is a replica in a process of its own: it runs job "killme" every second on the
// Redis at addr, printing "running <tick>" when it gets to run and then blocking until killed.
func runChildReplica(addr string) int {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	c, err := core.New(rdb)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := cronlock.New(c, cronlock.WithTTL(childTTL))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cr := cron.New(cron.WithSeconds())
	if _, err := l.Add(cr, "* * * * * *", "killme", func(ctx context.Context) error {
		tick, _ := cronlock.Tick(ctx)
		fmt.Printf("running %d\n", tick.Unix())
		<-ctx.Done()
		return ctx.Err()
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cr.Start()
	time.Sleep(30 * time.Second) // the parent kills us long before; this only bounds an orphan's life
	return 1
}

// TestReplica_killedMidRun SIGKILLs a replica (a child process) while it runs a tick: its lock stays
// until its TTL runs out and nobody runs the job meanwhile; then the next tick runs normally, and
// the killed tick never runs again.
func TestReplica_killedMidRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+srv.Addr())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			t.Logf("child stderr:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var killed int64
	select {
	case line := <-lines:
		if killed, err = strconv.ParseInt(strings.TrimPrefix(line, "running "), 10, 64); err != nil {
			t.Fatalf("child said %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the child replica did not run a tick within 10s")
	}
	kill()
	killedAt := time.Now()
	for range lines { // drained: the pipe is closed
	}
	lockKey := locktest.Key("@cron/killme")
	if ttl := rdb.PTTL(ctx, lockKey).Val(); ttl <= 0 {
		t.Fatalf("lock PTTL after the kill = %v, want the dead replica's lock to stay", ttl)
	}

	// While the dead replica's lock is valid, a replica firing for the same tick does not run it.
	var late events
	lateL := newLocker(t, locktest.NewClient(t, rdb), cronlock.WithHook(late.hook),
		cronlock.WithClock(fixed(time.Unix(killed, int64(200*time.Millisecond)))))
	lateL.Wrap("killme", mustParse(t, "* * * * * *"))(cronlock.Func(func(context.Context) error {
		t.Error("the killed tick ran again")
		return nil
	})).Run()
	if ev := late.last(t); ev.Outcome != cronlock.OutcomeBusy || ev.Tick.Unix() != killed {
		t.Fatalf("late replica: %+v, want busy for tick %d", ev, killed)
	}

	// Two healthy replicas take over.
	var log runLog
	evs := []*events{{}, {}}
	crons := make([]*cron.Cron, 2)
	lockers := make([]*cronlock.Locker, 2)
	defer func() {
		for i, c := range crons {
			if c != nil {
				stopCron(t, c, lockers[i])
			}
		}
	}()
	for i := range crons {
		l := newLocker(t, locktest.NewClient(t, srv.Client(t)), cronlock.WithTTL(childTTL), cronlock.WithHook(evs[i].hook))
		crons[i], lockers[i] = cron.New(cron.WithSeconds()), l
		if _, err := l.Add(crons[i], "* * * * * *", "killme", func(ctx context.Context) error {
			tick, _ := cronlock.Tick(ctx)
			log.add(tick, i)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		crons[i].Start()
	}
	locktest.Eventually(t, 2*childTTL, "the dead replica's lock to expire", func() bool {
		return !locktest.Held(t, rdb, lockKey)
	})
	expiredAt := time.Now()
	if d := expiredAt.Sub(killedAt); d > childTTL+250*time.Millisecond {
		t.Errorf("lock expired %v after the kill, TTL %v", d, childTTL)
	}
	locktest.Eventually(t, 5*time.Second, "three runs after the expiry", func() bool { return len(log.snapshot()) >= 3 })
	for i, c := range crons {
		stopCron(t, c, lockers[i])
	}

	runs := log.snapshot()
	ticks := checkOncePerTick(t, runs)
	if _, ok := runs[killed]; ok || ticks[0] <= killed {
		t.Fatalf("ticks %v ran, the killed tick %d among or after them", ticks, killed)
	}
	// The first tick after the expiry ran normally.
	if next := time.Unix(ticks[0], 0); next.Sub(expiredAt) > 1100*time.Millisecond {
		t.Errorf("first run for tick %v, %v after the lock expired", next, next.Sub(expiredAt))
	}
	// Every tick in between was skipped as busy: not run while the lock was valid.
	for i := range evs {
		for _, ev := range evs[i].all() {
			if ev.Tick.Unix() < ticks[0] && ev.Outcome != cronlock.OutcomeBusy {
				t.Errorf("replica %d, tick %d before the first run: %+v, want busy", i, ev.Tick.Unix(), ev)
			}
		}
	}
	if n, _ := rdb.Exists(ctx, fmt.Sprintf("lockkit:cron:{@cron/killme}:%d", killed)).Result(); n != 0 {
		t.Error("the killed tick has a completion marker")
	}
}
