package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// measureUncontended runs lock+unlock in g goroutines, each on its own key, for the window and
// returns ops/s, latency percentiles, allocations and Redis cost per operation.
func (h *harness) measureUncontended(ctx context.Context, scn string, cfg config, g, round int) (metrics, error) {
	servers := h.servers[:cfg.nodes]
	for _, s := range servers {
		if err := s.flush(ctx); err != nil {
			return nil, err
		}
	}
	rg := newRig(servers)
	defer rg.close()
	im, err := cfg.make(rg.rdbs, h.p.ttl)
	if err != nil {
		return nil, err
	}
	defer func() { _ = im.close() }()

	keys := make([]string, g)
	for i := range keys {
		keys[i] = fmt.Sprintf("u:%s:%d:%d:%d", scn, round, g, i)
	}
	// Warm-up: fills the connection pool and loads the scripts.
	if err := parallel(g, func(i int) error {
		for range 50 {
			if _, err := im.critical(ctx, keys[i], nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s warm-up: %w", cfg.name, err)
	}

	hs := make([]hist, g)
	ops := make([]int64, g)
	errs := make([]error, g)
	start := make(chan struct{})
	var wg sync.WaitGroup
	var t0 time.Time
	for i := range g {
		wg.Go(func() {
			<-start
			deadline := t0.Add(h.p.window)
			for {
				a := time.Now()
				if !a.Before(deadline) {
					return
				}
				if _, err := im.critical(ctx, keys[i], nil); err != nil {
					errs[i] = err
					return
				}
				hs[i].record(time.Since(a))
				ops[i]++
			}
		})
	}
	runtime.GC()
	if err := rg.begin(ctx); err != nil {
		return nil, err
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 = time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	runtime.ReadMemStats(&m1)
	u, err := rg.end(ctx)
	if err != nil {
		return nil, err
	}
	var all hist
	var n int64
	for i := range g {
		if errs[i] != nil {
			return nil, fmt.Errorf("%s: %w", cfg.name, errs[i])
		}
		all.merge(&hs[i])
		n += ops[i]
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no operation completed", cfg.name)
	}
	f := float64(n)
	return metrics{
		"ops_s":     f / elapsed.Seconds(),
		"p50_us":    us(all.quantile(0.50)),
		"p99_us":    us(all.quantile(0.99)),
		"allocs_op": float64(m1.Mallocs-m0.Mallocs) / f,
		"bytes_op":  float64(m1.TotalAlloc-m0.TotalAlloc) / f,
		"trips_op":  float64(u.trips) / f,
		"top_op":    float64(u.top) / f,
		"inner_op":  float64(u.inner) / f,
		"total_op":  float64(u.top+u.inner) / f,
		"cpu_op_us": float64(u.cpu) / f,
	}, nil
}

// parallel runs fn(0..n-1) in n goroutines and returns the first error.
func parallel(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
