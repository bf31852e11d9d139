package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// runAB measures the rows of spec ("a/b/c") in alternation, a fresh go-redis client (and lockkit
// Client) per row per round, rotated from round to round, and prints each round and the medians
// with their ranges, and each row's ratio to the last row paired per round. A row is
// "lockkit" (core.New(rdb) with defaults), "lockkit0" (WithPipelining(0)) or "redislock";
// "lockkit@ENV" is lockkit with LOCKKIT_PIPE=ENV in the environment while core.New runs, for an
// experimental build of core/internal/pipe that reads it (the committed one does not; issue #38's
// experiments read option overrides from it, bench/AUTOPIPELINE.md §9). Each line also gives the
// share of the machine other processes used during the window (from /proc/stat), and with
// AB_HOOK=1 the client's pipelines: their number, mean size, mean duration and mean gap between
// one's end and the next one's start.
func runAB(addr, spec string, g, rounds, poolSize int, d time.Duration) error {
	rows := strings.Split(spec, "/")
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer func() { _ = admin.Close() }()
	rates := make([][]float64, len(rows))
	cpus := make([][]float64, len(rows))
	srvs := make([][]float64, len(rows))
	for r := range rounds {
		for k := range rows {
			i := (k + r) % len(rows)
			row := rows[i]
			rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize})
			bh := &batchHook{}
			if os.Getenv("AB_HOOK") != "" {
				rdb.AddHook(bh)
			}
			op, closeRow, err := abRow(row, rdb)
			if err != nil {
				return err
			}
			keys := make([]string, g)
			for j := range keys {
				keys[j] = fmt.Sprintf("u:ab%d:%d:%d", i, g, j)
			}
			if err := loop(ctx, keys, 300*time.Millisecond, op); err != nil {
				return err
			}
			runtime.GC()
			s0, err := serverCPU(ctx, admin)
			if err != nil {
				return err
			}
			c0 := selfCPU()
			b0 := busyCPU()
			t0 := time.Now()
			n, err := count(ctx, keys, d, op)
			if err != nil {
				return err
			}
			el := time.Since(t0)
			c1 := selfCPU()
			b1 := busyCPU()
			s1, _ := serverCPU(ctx, admin)
			others := float64(b1-b0-(c1-c0)-(s1-s0)) / float64(el.Nanoseconds()) / float64(runtime.NumCPU())
			closeRow()
			_ = rdb.Close()
			f := float64(n)
			rate, cpu, srv := f/el.Seconds(), float64(c1-c0)/f/1e3, float64(s1-s0)/f/1e3
			fmt.Printf("round=%d g=%d row=%-28s ops/s=%6.0f client_cpu_us/op=%5.2f server_cpu_us/op=%5.2f others=%3.0f%% idle=%3.0f%% %s\n",
				r, g, row, rate, cpu, srv, others*100, 100-100*(float64(b1-b0)/float64(el.Nanoseconds())/float64(runtime.NumCPU())), bh)
			rates[i], cpus[i], srvs[i] = append(rates[i], rate), append(cpus[i], cpu), append(srvs[i], srv)
		}
	}
	last := len(rows) - 1
	for i, row := range rows {
		var ratio []float64
		for r := range rates[i] {
			ratio = append(ratio, rates[i][r]/rates[last][r])
		}
		fmt.Printf("SUMMARY g=%d row=%-28s ops/s=%s ratio_to_%s=%s client_cpu=%s server_cpu=%s\n",
			g, row, mr(rates[i], "%.0f"), rows[last], mr(ratio, "%.2f"), mr(cpus[i], "%.1f"), mr(srvs[i], "%.1f"))
	}
	return nil
}

// mr is "median (min–max)".
func mr(xs []float64, f string) string {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf(f+"("+f+"–"+f+")", s[len(s)/2], s[0], s[len(s)-1])
}

func abRow(row string, rdb *redis.Client) (func(ctx context.Context, key string) error, func(), error) {
	bg := context.Background()
	name, env, _ := strings.Cut(row, "@")
	switch name {
	case "lockkit", "lockkit0":
		_ = os.Setenv("LOCKKIT_PIPE", env)
		var opts []core.Option
		if name == "lockkit0" {
			opts = append(opts, core.WithPipelining(0))
		}
		c, err := core.New(rdb, opts...)
		_ = os.Unsetenv("LOCKKIT_PIPE")
		if err != nil {
			return nil, nil, err
		}
		op := func(ctx context.Context, key string) error {
			l, err := c.Acquire(ctx, key, 8*time.Second)
			if err != nil {
				return err
			}
			return l.Release(bg)
		}
		return op, func() { _ = c.Close(bg) }, nil
	case "redislock":
		c := redislock.New(rdb)
		op := func(ctx context.Context, key string) error {
			l, err := c.Obtain(ctx, key, 8*time.Second, nil)
			if err != nil {
				return err
			}
			return l.Release(bg)
		}
		return op, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown row %q", row)
}

// batchHook records each pipeline's size, its duration and the gap since the previous one ended.
type batchHook struct {
	mu              sync.Mutex
	lastEnd         time.Time
	n, cmds         int
	execSum, gapSum time.Duration
	inExec          int
}

func (b *batchHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (b *batchHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (b *batchHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		t0 := time.Now()
		b.mu.Lock()
		if !b.lastEnd.IsZero() && b.inExec == 0 {
			b.gapSum += t0.Sub(b.lastEnd)
		}
		b.inExec++
		b.mu.Unlock()
		err := next(ctx, cmds)
		t1 := time.Now()
		b.mu.Lock()
		b.inExec--
		b.n++
		b.cmds += len(cmds)
		b.execSum += t1.Sub(t0)
		b.lastEnd = t1
		b.mu.Unlock()
		return err
	}
}

func (b *batchHook) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		return "no batches"
	}
	return fmt.Sprintf("batches=%d avg_size=%.1f avg_exec_us=%.0f avg_gap_us=%.0f", b.n, float64(b.cmds)/float64(b.n),
		float64(b.execSum.Microseconds())/float64(b.n), float64(b.gapSum.Microseconds())/float64(b.n))
}

// busyCPU is the machine's non-idle CPU time (all CPUs), in ns, from /proc/stat.
func busyCPU() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f[1:] {
		var n int64
		fmt.Sscan(v, &n)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy * 1e7 // USER_HZ 100
}
