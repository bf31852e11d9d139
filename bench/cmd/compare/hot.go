package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// csRec is one critical section: when its acquire call started (t0) and returned (t1), and when
// its release returned (t2), as offsets from the start of the run; seq is a number taken inside
// the critical section, so it orders critical sections as the lock did.
type csRec struct {
	seq        int64
	worker     int
	t0, t1, t2 time.Duration
}

// hotRun is the raw outcome of workers contending for one key.
type hotRun struct {
	recs     []csRec
	cut      []time.Duration // waits still running when the window ended (cut there)
	gaveUp   int
	overlaps int64 // critical sections that overlapped: must be 0
	elapsed  time.Duration
}

// contend runs workers goroutines that each take key, hold it for hold (time.Sleep, like I/O
// under the lock; nothing for 0) and release it, again and again, for the window. At the end of
// the window the waits still running are cancelled and recorded as cut.
func contend(ctx context.Context, im impl, key string, workers int, hold, window time.Duration) (*hotRun, error) {
	var (
		seq, inside atomic.Int64
		overlaps    atomic.Int64
		mu          sync.Mutex
		run         = &hotRun{}
		firstErr    error
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	stop := time.AfterFunc(window, cancel)
	defer stop.Stop()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var (
				t1   time.Duration
				s    int64
				recs = make([]csRec, 0, 4096)
				cut  []time.Duration
				gave int
			)
			body := func() {
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				t1 = time.Since(start)
				s = seq.Add(1)
				if hold > 0 {
					time.Sleep(hold)
				}
				inside.Add(-1)
			}
			var err error
			for time.Since(start) < window {
				t0 := time.Since(start)
				var n int
				n, err = im.critical(wctx, key, body)
				t2 := time.Since(start)
				gave += n
				if err != nil {
					if wctx.Err() != nil {
						cut = append(cut, t2-t0)
						err = nil
					}
					break
				}
				recs = append(recs, csRec{seq: s, worker: w, t0: t0, t1: t1, t2: t2})
			}
			mu.Lock()
			defer mu.Unlock()
			run.recs = append(run.recs, recs...)
			run.cut = append(run.cut, cut...)
			run.gaveUp += gave
			if err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
		})
	}
	wg.Wait()
	run.elapsed = time.Since(start)
	run.overlaps = overlaps.Load()
	if firstErr != nil {
		return nil, firstErr
	}
	return run, nil
}

// hotMetrics turns a run and its Redis usage into the table's figures.
func hotMetrics(run *hotRun, u usage) (metrics, error) {
	n := len(run.recs)
	if n < 2 {
		return nil, fmt.Errorf("only %d critical sections completed", n)
	}
	if run.overlaps > 0 {
		return nil, fmt.Errorf("%d critical sections overlapped: mutual exclusion broken", run.overlaps)
	}
	slices.SortFunc(run.recs, func(a, b csRec) int { return int(a.seq - b.seq) })
	waits := make([]time.Duration, 0, n+len(run.cut))
	handoffs := make([]time.Duration, 0, n)
	same := 0
	for i, r := range run.recs {
		waits = append(waits, r.t1-r.t0)
		if i > 0 {
			p := run.recs[i-1]
			handoffs = append(handoffs, max(r.t1-p.t2, 0))
			if r.worker == p.worker {
				same++
			}
		}
	}
	waits = append(waits, run.cut...)
	per := map[int]int{}
	busiest := 0
	for _, r := range run.recs {
		per[r.worker]++
		busiest = max(busiest, per[r.worker])
	}
	f := float64(n)
	return metrics{
		"cs_s":           f / run.elapsed.Seconds(),
		"wait_p50_ms":    ms(pct(waits, 50)),
		"wait_p99_ms":    ms(pct(waits, 99)),
		"wait_max_ms":    ms(pct(waits, 100)),
		"handoff_p50_us": us(pct(handoffs, 50)),
		"handoff_p99_us": us(pct(handoffs, 99)),
		"same_pct":       100 * float64(same) / float64(n-1),
		"busiest_pct":    100 * float64(busiest) / f,
		"cut":            float64(len(run.cut)),
		"gave_cs":        float64(run.gaveUp) / f,
		"top_cs":         float64(u.top) / f,
		"inner_cs":       float64(u.inner) / f,
		"total_cs":       float64(u.top+u.inner) / f,
		"trips_cs":       float64(u.trips) / f,
		"cpu_cs_us":      float64(u.cpu) / f,
	}, nil
}

// measureHot: workers on one key with the given hold, after a short warm-up on another key (the
// pool fills, scripts load). The warm-up key differs because a cancelled Redlock attempt may leave
// a partial lock behind on some nodes until its TTL.
func (h *harness) measureHot(ctx context.Context, scn string, cfg config, hold, window time.Duration, round int) (metrics, error) {
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
	key := fmt.Sprintf("hot:%s:%d:%s", scn, round, hold)
	if _, err := contend(ctx, im, key+":warm", h.p.workers, hold, h.p.warm); err != nil {
		return nil, fmt.Errorf("%s warm-up: %w", cfg.name, err)
	}
	if err := rg.begin(ctx); err != nil {
		return nil, err
	}
	run, err := contend(ctx, im, key, h.p.workers, hold, window)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.name, err)
	}
	u, err := rg.end(ctx)
	if err != nil {
		return nil, err
	}
	m, err := hotMetrics(run, u)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.name, err)
	}
	return m, nil
}
