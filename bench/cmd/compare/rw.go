package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// The read-mostly scenario (by default, or alone with -only rw): readers take one key's read side in a loop, each
// holding it rwHold, while a writer (another client, as another process would be) takes its write
// side every rwPeriod and holds it rwHold. It measures the reads per second and the writer's wait.
// Only lockkit has a read-write lock; its row is compared with lockkit's plain lock used for the
// reads and the writes alike (what a user without a read-write lock does).

const (
	rwReaders = 8
	rwHold    = time.Millisecond
	rwPeriod  = 100 * time.Millisecond
)

// rwConfig is a row of the read-mostly table.
type rwConfig struct {
	name, settings string
	read, write    []core.AcquireOption
}

func rwConfigs() []rwConfig {
	return []rwConfig{
		{name: "lockkit read-write", settings: "core.New(rdb); readers Acquire(ctx, key, ttl, core.Read()), the writer core.Write()",
			read: []core.AcquireOption{core.Read()}, write: []core.AcquireOption{core.Write()}},
		{name: "lockkit lock", settings: "core.New(rdb); readers and the writer Acquire(ctx, key, ttl): the exclusive lock for both"},
	}
}

// rwRun is the raw outcome of a read-mostly run.
type rwRun struct {
	reads    int64
	waits    []time.Duration // the writer's, including a wait cut at the window's end
	overlaps int64           // a writer inside with anyone else, or a reader with a writer: must be 0
	elapsed  time.Duration
}

// readMostly runs the readers and the writer on key for the window.
func readMostly(ctx context.Context, readers, writer *core.Client, cfg rwConfig, key string, ttl, window time.Duration) (*rwRun, error) {
	var (
		rin, win, overlaps, reads atomic.Int64
		mu                        sync.Mutex
		firstErr                  error
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	stop := time.AfterFunc(window, cancel)
	defer stop.Stop()
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil && wctx.Err() == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup
	for range rwReaders {
		wg.Go(func() {
			for wctx.Err() == nil {
				err := readers.Do(wctx, key, ttl, func(context.Context) error {
					if rin.Add(1); win.Load() != 0 {
						overlaps.Add(1)
					}
					time.Sleep(rwHold)
					rin.Add(-1)
					return nil
				}, cfg.read...)
				if err != nil {
					if wctx.Err() == nil {
						fail(err)
					}
					return
				}
				reads.Add(1)
			}
		})
	}
	run := &rwRun{}
	tick := time.NewTicker(rwPeriod)
	defer tick.Stop()
	for wctx.Err() == nil {
		select {
		case <-tick.C:
		case <-wctx.Done():
			continue
		}
		t0 := time.Now()
		err := writer.Do(wctx, key, ttl, func(context.Context) error {
			run.waits = append(run.waits, time.Since(t0))
			if win.Add(1); rin.Load() != 0 {
				overlaps.Add(1)
			}
			time.Sleep(rwHold)
			win.Add(-1)
			return nil
		}, cfg.write...)
		if err != nil && wctx.Err() != nil {
			run.waits = append(run.waits, time.Since(t0)) // cut at the window's end
		} else if err != nil {
			fail(err)
		}
	}
	wg.Wait()
	run.elapsed, run.reads, run.overlaps = time.Since(start), reads.Load(), overlaps.Load()
	if firstErr != nil {
		return nil, firstErr
	}
	return run, nil
}

// measureRW runs the read-mostly scenario for one row, after a short warm-up on another key.
func (h *harness) measureRW(ctx context.Context, cfg rwConfig, round int) (metrics, error) {
	s := h.servers[0]
	if err := s.flush(ctx); err != nil {
		return nil, err
	}
	rg := newRig(h.servers[:1])
	defer rg.close()
	wrdb := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: poolSize})
	wrdb.AddHook(rg.counters[0])
	defer wrdb.Close()
	readers, err := core.New(rg.rdbs[0])
	if err != nil {
		return nil, err
	}
	writer, err := core.New(wrdb)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = readers.Close(cctx)
		_ = writer.Close(cctx)
	}()
	key := fmt.Sprintf("rw:%d", round)
	if _, err := readMostly(ctx, readers, writer, cfg, key+":warm", h.p.ttl, max(h.p.warm, 2*rwPeriod)); err != nil {
		return nil, fmt.Errorf("%s warm-up: %w", cfg.name, err)
	}
	if err := rg.begin(ctx); err != nil {
		return nil, err
	}
	run, err := readMostly(ctx, readers, writer, cfg, key, h.p.ttl, h.p.hotWindow)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.name, err)
	}
	u, err := rg.end(ctx)
	if err != nil {
		return nil, err
	}
	if run.overlaps > 0 {
		return nil, fmt.Errorf("%s: %d critical sections overlapped a writer: exclusion broken", cfg.name, run.overlaps)
	}
	if run.reads < 2 || len(run.waits) < 2 {
		return nil, fmt.Errorf("%s: only %d reads and %d writes", cfg.name, run.reads, len(run.waits))
	}
	slices.Sort(run.waits)
	ops := float64(run.reads + int64(len(run.waits)))
	return metrics{
		"reads_s":     float64(run.reads) / run.elapsed.Seconds(),
		"writes":      float64(len(run.waits)),
		"wwait_p50":   ms(pct(run.waits, 50)),
		"wwait_p99":   ms(pct(run.waits, 99)),
		"wwait_max":   ms(pct(run.waits, 100)),
		"trips_rw_op": float64(u.trips) / ops,
		"total_rw_op": float64(u.top+u.inner) / ops,
		"cpu_rw_op":   float64(u.cpu) / ops,
	}, nil
}

func rwCols() []column {
	return []column{
		{key: "reads_s", head: "reads/s"}, {key: "reads_s", head: "reads/s vs lock", ratioTo: "lockkit lock"},
		{key: "writes", head: "writes"}, {key: "wwait_p50", head: "writer wait p50 ms"},
		{key: "wwait_p99", head: "writer wait p99 ms"}, {key: "wwait_max", head: "writer wait max ms"},
		{key: "trips_rw_op", head: "round trips/op"}, {key: "total_rw_op", head: "all cmds/op"},
		{key: "cpu_rw_op", head: "server CPU µs/op"},
	}
}

// writeRW writes the read-mostly section.
func writeRW(w io.Writer, s *store, p params) {
	fmt.Fprintf(w, "## Read-mostly: %d readers and a writer every %s\n\n", rwReaders, rwPeriod)
	fmt.Fprintf(w, "%d goroutines of one client take one key's read side in a loop, each holding it %s; a writer on another client takes its write side every %s and holds it %s, for %s. *writer wait* = from the writer's call to its critical section (a wait cut at the window's end counts with its length so far). *op* = a read or a write. The harness checks that no reader is inside with a writer. Only lockkit has a read-write lock (redsync and redislock have none): the second row is lockkit's exclusive lock used for the reads and the writes alike.\n\n",
		rwReaders, rwHold, rwPeriod, rwHold, p.hotWindow)
	fmt.Fprintf(w, "| row | settings |\n| --- | --- |\n")
	for _, c := range rwConfigs() {
		fmt.Fprintf(w, "| %s | %s |\n", c.name, c.settings)
	}
	fmt.Fprintln(w)
	s.table(w, "rw", "readers", rwCols())
}
