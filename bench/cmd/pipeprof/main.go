// Command pipeprof profiles one row of compare's "Uncontended lock + unlock" table at a time
// (issue #31): g goroutines each lock and unlock their own key, through lockkit with
// WithPipelining(8) or through the raw floor sent with rdb.AutoPipeline(). It reports ops/s, this
// process's CPU per operation (user + system, from getrusage), the server's CPU per operation
// (INFO cpu), and allocations per operation, and can write CPU and allocation profiles.
//
// It drives an existing redis-server (-addr); start one with persistence off. Built from two
// checkouts, its binaries can be run in alternation against one server for an A/B comparison.
//
//	pipeprof -addr 127.0.0.1:6399 -row lockkit -g 64 -d 5s -rounds 3 -cpuprofile cpu.out
//
// With -ab it measures several rows in alternation in one process instead (see runAB):
//
//	AB_HOOK=1 pipeprof -addr 127.0.0.1:6399 -ab 'lockkit/lockkit0/redislock' -g 16 -d 1s -rounds 8
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockkit/lockkit/bench/internal/serverinfo"
	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

const rawRelease = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pipeprof:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:6379", "redis-server address")
	row := flag.String("row", "lockkit", "lockkit (WithPipelining(8)) or floor (raw floor through rdb.AutoPipeline())")
	g := flag.Int("g", 64, "goroutines, each on its own key")
	d := flag.Duration("d", 3*time.Second, "measurement window per round")
	rounds := flag.Int("rounds", 1, "rounds (a line each, then the median)")
	threshold := flag.Int("threshold", 8, "WithPipelining's threshold for the lockkit row")
	cpuprof := flag.String("cpuprofile", "", "write a CPU profile of the measurement windows")
	memprof := flag.String("memprofile", "", "write an allocation profile (every allocation sampled)")
	tag := flag.String("tag", "", "label printed on each line (e.g. the build's commit)")
	ab := flag.String("ab", "", "rows to measure in alternation, a/b/c (see runAB); -g, -d, -rounds apply")
	pool := flag.Int("pool", 128, "go-redis PoolSize for -ab (compare's)")
	flag.Parse()
	if *ab != "" {
		return runAB(*addr, *ab, *g, *rounds, *pool, *d)
	}

	if *memprof != "" {
		runtime.MemProfileRate = 1
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 10 * runtime.GOMAXPROCS(0)})
	defer func() { _ = rdb.Close() }()
	admin := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 1})
	defer func() { _ = admin.Close() }()

	op, closeRow, err := newRow(*row, rdb, *threshold)
	if err != nil {
		return err
	}
	defer closeRow()

	keys := make([]string, *g)
	for i := range keys {
		keys[i] = fmt.Sprintf("u:%s:0:%d:%d", *row, *g, i) // (compare's key shape and length)
	}
	if err := loop(ctx, keys, 300*time.Millisecond, op); err != nil { // warm-up
		return err
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var rates, cpus, srvs, allocs []float64
	for r := range *rounds {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		s0, err := serverCPU(ctx, admin)
		if err != nil {
			return err
		}
		c0 := selfCPU()
		t0 := time.Now()
		n, err := count(ctx, keys, *d, op)
		if err != nil {
			return err
		}
		el := time.Since(t0)
		c1 := selfCPU()
		s1, err := serverCPU(ctx, admin)
		if err != nil {
			return err
		}
		runtime.ReadMemStats(&m1)
		f := float64(n)
		rate, cpu, srv := f/el.Seconds(), float64(c1-c0)/f/1e3, float64(s1-s0)/f/1e3
		al, by := float64(m1.Mallocs-m0.Mallocs)/f, float64(m1.TotalAlloc-m0.TotalAlloc)/f
		fmt.Printf("%s row=%s g=%d round=%d ops/s=%.0f client_cpu_us/op=%.2f server_cpu_us/op=%.2f allocs/op=%.2f B/op=%.0f\n",
			*tag, *row, *g, r, rate, cpu, srv, al, by)
		rates, cpus, srvs, allocs = append(rates, rate), append(cpus, cpu), append(srvs, srv), append(allocs, al)
	}
	if *rounds > 1 {
		fmt.Printf("%s row=%s g=%d median ops/s=%.0f client_cpu_us/op=%.2f server_cpu_us/op=%.2f allocs/op=%.2f\n",
			*tag, *row, *g, median(rates), median(cpus), median(srvs), median(allocs))
	}
	if *memprof != "" {
		f, err := os.Create(*memprof)
		if err != nil {
			return err
		}
		defer f.Close()
		return pprof.Lookup("allocs").WriteTo(f, 0)
	}
	return nil
}

// newRow returns one lock+unlock of the row on a key.
func newRow(row string, rdb *redis.Client, threshold int) (func(ctx context.Context, key string) error, func(), error) {
	switch row {
	case "lockkit":
		c, err := core.New(rdb, core.WithPipelining(threshold))
		if err != nil {
			return nil, nil, err
		}
		bg := context.Background()
		op := func(ctx context.Context, key string) error {
			l, err := c.Acquire(ctx, key, 8*time.Second)
			if err != nil {
				return err
			}
			return l.Release(bg)
		}
		return op, func() { _ = c.Close(context.Background()) }, nil
	case "floor":
		ap, err := rdb.AutoPipeline()
		if err != nil {
			return nil, nil, err
		}
		del := redis.NewScript(rawRelease)
		op := func(ctx context.Context, key string) error {
			var b [16]byte
			_, _ = rand.Read(b[:])
			token := hex.EncodeToString(b[:])
			ok, err := ap.SetNX(ctx, key, token, 8*time.Second).Result()
			if err != nil || !ok {
				return fmt.Errorf("SET NX: %v, %v", ok, err)
			}
			n, err := del.Run(ctx, ap, []string{key}, token).Int64()
			if err == nil && n != 1 {
				err = errors.New("release: not ours")
			}
			return err
		}
		return op, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown row %q", row)
}

func loop(ctx context.Context, keys []string, d time.Duration, op func(context.Context, string) error) error {
	_, err := count(ctx, keys, d, op)
	return err
}

// count runs op in one goroutine per key for d and returns the operations done.
func count(ctx context.Context, keys []string, d time.Duration, op func(context.Context, string) error) (int64, error) {
	var n atomic.Int64
	var stop atomic.Bool
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			var m int64
			for !stop.Load() {
				if err := op(ctx, k); err != nil {
					errs[i] = err
					break
				}
				m++
			}
			n.Add(m)
		})
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return n.Load(), errors.Join(errs...)
}

// selfCPU is this process's user + system CPU time, in ns.
func selfCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// serverCPU is the server's used_cpu_user + used_cpu_sys, in ns.
func serverCPU(ctx context.Context, admin *redis.Client) (int64, error) {
	info, err := admin.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	total, err := serverinfo.CPUSeconds(info)
	if err != nil {
		return 0, err
	}
	return int64(total * 1e9), nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
