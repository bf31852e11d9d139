package core_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// rawRelease is the raw floor's compare-and-delete, made on first use: redis.NewScript hashes with
// SHA-1, which panics in this test binary's run under GODEBUG=fips140=only (fips_test.go).
var rawRelease = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
})

// rawLockUnlock is the floor: SET NX PX with a random token, then EVALSHA compare-and-delete.
func rawLockUnlock(ctx context.Context, rdb *redis.Client, key, token string) error {
	ok, err := rdb.SetNX(ctx, key, token, time.Second).Result()
	if err != nil || !ok {
		return fmt.Errorf("raw lock: %v %v", ok, err)
	}
	return rawRelease().Run(ctx, rdb, []string{key}, token).Err()
}

func poolOpts(srv *redistest.Server, size int) *redis.Options {
	o := srv.Options()
	o.PoolSize = size
	o.MinIdleConns = size
	return o
}

// BenchmarkLockUnlock measures uncontended lock+unlock (a distinct key per goroutine) for lockkit
// and the raw floor, side by side in one run, at 1, 16 and 64 goroutines.
func BenchmarkLockUnlock(b *testing.B) {
	srv := redistest.Start(b)
	for _, g := range []int{1, 16, 64} {
		rdb := redis.NewClient(poolOpts(srv, g))
		b.Cleanup(func() { rdb.Close() })
		c := locktest.NewClient(b, rdb)
		ctx := context.Background()
		b.Run(fmt.Sprintf("impl=raw/g=%d", g), func(b *testing.B) {
			runParallel(b, g, func(i int) func() error {
				key := "raw:" + strconv.Itoa(i)
				return func() error { return rawLockUnlock(ctx, rdb, key, tokenFor(i)) }
			})
		})
		b.Run(fmt.Sprintf("impl=lockkit/g=%d", g), func(b *testing.B) {
			runParallel(b, g, func(i int) func() error {
				name := "lk:" + strconv.Itoa(i)
				return func() error {
					l, err := c.Acquire(ctx, name, time.Second)
					if err != nil {
						return err
					}
					return l.Release(ctx)
				}
			})
		})
	}
}

func tokenFor(i int) string { return fmt.Sprintf("%032d", i) }

// runParallel runs b.N calls spread over g goroutines, each with its own op. It reports the CPU the
// process used per call (client-cpu-µs/op): the client's cost, which the redis-servers' load does
// not blur as much as it blurs ns/op.
func runParallel(b *testing.B, g int, mk func(i int) func() error) {
	b.ReportAllocs()
	var next atomic.Int64
	ops := make([]func() error, g)
	for i := range ops {
		ops[i] = mk(i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, g)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := ops[i](); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "client-cpu-µs/op")
	}
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkTryAcquireContended is a failed try: one round trip.
func BenchmarkTryAcquireContended(b *testing.B) {
	srv := redistest.Start(b)
	c := locktest.NewClient(b, srv.Client(b))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "hot", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release(ctx)
	other := locktest.NewClient(b, srv.Client(b))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := other.TryAcquire(ctx, "hot", time.Second); err == nil {
			b.Fatal("acquired a held lock")
		}
	}
}

// BenchmarkContended: goroutines on one key, each holding it for `hold`, in one or two clients.
// One op is one critical section. Reports critical sections per second, wait and handoff
// percentiles, and Redis commands per critical section (top-level commands sent by clients, from
// INFO commandstats, and the calls made inside scripts).
func BenchmarkContended(b *testing.B) {
	srv := redistest.Start(b)
	cases := []struct {
		name    string
		clients int
		perCli  int
		fair    bool
	}{
		{"clients=1/g=8", 1, 8, false},
		{"clients=2/g=4+4", 2, 4, false},
		{"clients=2/g=4+4/fair", 2, 4, true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var clients []*core.Client
			for range tc.clients {
				rdb := redis.NewClient(poolOpts(srv, tc.perCli+2))
				b.Cleanup(func() { rdb.Close() })
				clients = append(clients, locktest.NewClient(b, rdb))
			}
			var opts []core.AcquireOption
			if tc.fair {
				opts = append(opts, core.Fair())
			}
			runContended(b, srv, clients, tc.perCli, time.Millisecond, opts)
		})
	}
}

func runContended(b *testing.B, srv *redistest.Server, clients []*core.Client, perCli int, hold time.Duration, opts []core.AcquireOption) {
	ctx := context.Background()
	type cs struct {
		fence            int64
		holder           int
		called, acquired time.Time
		released         time.Time
	}
	var (
		done atomic.Int64
		mu   sync.Mutex
		log  []cs
		wg   sync.WaitGroup
		errs = make(chan error, 64)
	)
	srv.ResetStats(b)
	b.ResetTimer()
	start := time.Now()
	for ci, c := range clients {
		for gi := range perCli {
			id := ci*1000 + gi + 1
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done.Add(1) <= int64(b.N) {
					t0 := time.Now()
					l, err := c.Acquire(ctx, "hot", time.Second, opts...)
					if err != nil {
						errs <- err
						return
					}
					t1 := time.Now()
					spin(hold)
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					log = append(log, cs{fence: l.Fence(), holder: id, called: t0, acquired: t1, released: time.Now()})
					mu.Unlock()
				}
			}()
		}
	}
	elapsed, st, top := finishRun(b, srv, &wg, start, errs)
	var all int64
	for k, v := range st {
		if k != "config|resetstat" && k != "info" && k != "hello" && k != "client|setinfo" {
			all += v
		}
	}
	// Order critical sections by fence (acquisition order): handoff i = acquire return of i+1 minus
	// release return of i (0 when the waiter's acquire returned first).
	slices.SortFunc(log, func(a, b cs) int { return int(a.fence - b.fence) })
	var waits, handoffs []time.Duration
	same := 0
	for i, x := range log {
		waits = append(waits, x.acquired.Sub(x.called))
		if i > 0 {
			handoffs = append(handoffs, max(x.acquired.Sub(log[i-1].released), 0))
			if x.holder == log[i-1].holder {
				same++
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "cs/s")
	b.ReportMetric(float64(top)/n, "cmds/cs")
	b.ReportMetric(float64(all-top)/n, "luacalls/cs")
	b.ReportMetric(ms(pct(waits, 50)), "wait-p50-ms")
	b.ReportMetric(ms(pct(waits, 99)), "wait-p99-ms")
	b.ReportMetric(float64(pct(handoffs, 50).Microseconds()), "handoff-p50-µs")
	b.ReportMetric(float64(pct(handoffs, 99).Microseconds()), "handoff-p99-µs")
	b.ReportMetric(float64(same)/n, "same-holder")
}

// spin holds the lock for d without yielding the P for long (a sleep would round up to the timer
// resolution).
// finishRun waits for a contended run's workers, fails on their errors and returns how long the run
// took, the server's command stats and the top-level commands among them (the scripts and the
// subscription's commands).
func finishRun(b *testing.B, srv *redistest.Server, wg *sync.WaitGroup, start time.Time, errs chan error) (time.Duration, map[string]int64, int64) {
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	st := srv.CommandStats(b)
	return elapsed, st, st["evalsha"] + st["eval"] + st["subscribe"] + st["unsubscribe"] + st["ping"]
}

func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		runtime.Gosched()
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// BenchmarkHeldLocks holds 100 000 locks in one process for a few renewal intervals and reports Go
// heap per held lock, goroutines, and the size of renewal pipelines.
func BenchmarkHeldLocks(b *testing.B) {
	const n = 100_000
	srv := redistest.Start(b)
	c := locktest.NewClient(b, srv.Client(b))
	ctx := context.Background()
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		locks := make([]*core.Lock, n)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 16 {
					l, err := c.Acquire(ctx, "held:"+strconv.Itoa(i), 3*time.Second)
					if err != nil {
						b.Error(err)
						return
					}
					locks[i] = l
				}
			}()
		}
		wg.Wait()
		b0, i0 := core.RenewStats(c)
		time.Sleep(3 * time.Second) // three renewal intervals: the behaviour being measured
		b1, i1 := core.RenewStats(c)
		runtime.GC()
		runtime.ReadMemStats(&after)
		g1 := runtime.NumGoroutine()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/lock")
		b.ReportMetric(float64(g1-g0), "goroutines-added")
		if b1 > b0 {
			b.ReportMetric(float64(i1-i0)/float64(b1-b0), "scripts/pipeline")
		}
		for _, l := range locks {
			if l.Context().Err() != nil {
				b.Fatalf("lock %s lost: %v", l.Name(), context.Cause(l.Context()))
			}
		}
		runtime.KeepAlive(locks)
		for _, l := range locks {
			_ = l.Release(ctx)
		}
	}
}
