package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"time"
)

// measureHeld holds len(keys) locks, then observes them for the observation window: memory and
// goroutines per lock, what keeping them alive costs Redis and the client per renewal, and the
// latency of a foreground acquire and release (one every fgPace, on a key of its own) beside them,
// against the same before any lock was held: through the library's client that holds them, and
// through another of its clients over the same go-redis client (which the holder's own work, such
// as lockkit's watchdog, does not delay).
func (h *harness) measureHeld(ctx context.Context, hc heldConfig, round int) (metrics, error) {
	ttl, observe := h.p.heldTTL, h.p.observe
	if hc.ttl > 0 {
		ttl, observe = hc.ttl, hc.observe
	}
	s := h.servers[0]
	if err := s.flush(ctx); err != nil {
		return nil, err
	}
	rg := newRig(h.servers[:1])
	defer rg.close()
	keys := make([]string, h.p.heldN)
	for i := range keys {
		keys[i] = fmt.Sprintf("held:%d:%d", round, i)
	}
	fgKey := fmt.Sprintf("held-fg:%d", round)
	lib, err := hc.open(rg.rdbs[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hc.name, err)
	}
	other, err := hc.open(rg.rdbs[0])
	if err != nil {
		_ = lib.close()
		return nil, fmt.Errorf("%s: %w", hc.name, err)
	}
	m, err := h.observeHeld(ctx, rg, lib, other, keys, fgKey, ttl, observe)
	err = errors.Join(err, lib.close(), other.close())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hc.name, err)
	}
	return m, nil
}

// observeHeld is measureHeld's work over lib (other: the library's other client). The observation
// window has two halves: the first measures what keeping the locks alive costs, with nothing else
// running; the second the foreground's latency beside them.
func (h *harness) observeHeld(ctx context.Context, rg *rig, lib, other heldLib, keys []string, fgKey string, ttl, observe time.Duration) (metrics, error) {
	srv := rg.servers[0]
	if err := srv.latencyReset(ctx); err != nil {
		return nil, err
	}
	idle, idleOther := foregrounds(ctx, lib, other, fgKey, ttl, h.p.fgPace, h.p.fgIdle)
	if err := errors.Join(idle.err, idleOther.err); err != nil {
		return nil, err
	}
	stallIdle, err := srv.longestFast(ctx)
	if err != nil {
		return nil, err
	}

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	hctx, cancel := context.WithTimeout(ctx, holdLimit)
	hd, err := lib.hold(hctx, keys, ttl)
	cancel()
	if err != nil {
		return nil, err
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if err := rg.begin(ctx); err != nil {
		_, _ = hd.release()
		return nil, err
	}
	cost := observe / 2
	cpu0 := processCPU()
	peak := observeGoroutines(cost)
	cpu := processCPU() - cpu0
	u, err := rg.end(ctx)
	var beside, besideOther *fgStats
	if err == nil {
		var fgPeak int
		done := make(chan struct{})
		go func() { fgPeak = observeGoroutines(observe-cost) - 2; close(done) }() // (the foregrounds' goroutines)
		err = srv.latencyReset(ctx)
		beside, besideOther = foregrounds(ctx, lib, other, fgKey, ttl, h.p.fgPace, observe-cost)
		<-done
		peak = max(peak, fgPeak)
		err = errors.Join(err, beside.err, besideOther.err)
	}
	var stall float64
	if err == nil {
		stall, err = srv.longestFast(ctx)
	}
	lost := hd.lost()
	relMean, rerr := hd.release()
	if err = errors.Join(err, rerr); err != nil {
		return nil, err
	}

	n := float64(len(keys))
	intervals := float64(cost) / float64(ttl/3)
	renewals := float64(u.calls["pexpire"]) // one per renewal (lockkit's renew scripts, redislock's Refresh)
	m := metrics{
		"locks":             n,
		"mem_lock_b":        float64(int64(m1.HeapAlloc+m1.StackInuse)-int64(m0.HeapAlloc+m0.StackInuse)) / n,
		"heap_inuse_lock_b": float64(int64(m1.HeapInuse)-int64(m0.HeapInuse)) / n,
		"goroutines":        float64(peak - g0),
		"trips_int":         float64(u.trips) / intervals,
		"top_int":           float64(u.top) / intervals,
		"cpu_int_ms":        float64(u.cpu) / 1000 / intervals,
		"lost":              float64(lost),
		"trips_lock":        float64(u.trips) / intervals / n,
		"intervals":         intervals,
		"observe_sec":       observe.Seconds(),
		"ttl_s":             ttl.Seconds(),
		"renew_s":           renewals / cost.Seconds(),
		"release_us":        us(relMean),
		"stall_idle_ms":     stallIdle,
		"stall_ms":          stall,
	}
	if renewals > 0 {
		m["redis_us_renew"] = float64(u.cpu) / renewals
		m["client_us_renew"] = cpu / renewals
	}
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		for _, op := range []struct {
			name         string
			idle, beside *hist
		}{{"acq", &idle.acq, &beside.acq}, {"rel", &idle.rel, &beside.rel},
			{"acq_other", &idleOther.acq, &besideOther.acq}, {"rel_other", &idleOther.rel, &besideOther.rel}} {
			i, b := us(op.idle.quantile(q.q)), us(op.beside.quantile(q.q))
			m["fg_"+op.name+"_idle_"+q.name+"_us"] = i
			m["fg_"+op.name+"_"+q.name+"_us"] = b
			if i > 0 {
				m["fg_"+op.name+"_"+q.name+"_x"] = b / i
			}
		}
	}
	return m, nil
}

// foregrounds runs foreground through lib and through other at the same time.
func foregrounds(ctx context.Context, lib, other heldLib, key string, ttl, pace, d time.Duration) (*fgStats, *fgStats) {
	done := make(chan *fgStats, 1)
	go func() { done <- foreground(ctx, other, key+":other", ttl, pace, d) }()
	st := foreground(ctx, lib, key, ttl, pace, d)
	return st, <-done
}

// fgStats is what a foreground run saw.
type fgStats struct {
	acq, rel hist
	n        int // acquire+release pairs
	err      error
}

// foreground takes and releases key through lib once every pace for d (a pair that overruns its
// slot starts the next one at once), recording each acquire's and release's latency.
func foreground(ctx context.Context, lib heldLib, key string, ttl, pace, d time.Duration) *fgStats {
	st := &fgStats{}
	t := time.NewTicker(pace)
	defer t.Stop()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			st.err = ctx.Err()
			return st
		case <-t.C:
		}
		acq, rel, err := lib.once(ctx, key, ttl)
		if err != nil {
			st.err = fmt.Errorf("foreground acquire+release: %w", err)
			return st
		}
		st.acq.record(acq)
		st.rel.record(rel)
		st.n++
	}
	return st
}

// processCPU is the CPU time (user + system) of this process so far, in µs.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// observeGoroutines waits for d and returns the largest goroutine count seen meanwhile (its own
// sampling goroutine not included: it samples from the caller's).
func observeGoroutines(d time.Duration) int {
	peak := runtime.NumGoroutine()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	end := time.After(d)
	for {
		select {
		case <-t.C:
			peak = max(peak, runtime.NumGoroutine())
		case <-end:
			return peak
		}
	}
}
