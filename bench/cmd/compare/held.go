package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// holdLimit bounds taking all the locks.
const holdLimit = 2 * time.Minute

// acquireWorkers take (and release) the held locks in parallel.
const acquireWorkers = 16

// holding is a set of held locks while they are observed.
type holding struct {
	lost    func() int   // locks lost so far
	release func() error // releases everything and stops what acquire started
}

// heldConfigs are the ways to keep many locks alive.
func heldConfigs() []heldConfig {
	return []heldConfig{
		{name: "lockkit", settings: "core.New(rdb); Acquire each lock once; the client's one watchdog renews them all (pipelined batches of up to 1000)",
			hold: holdLockkit},
		{name: "redislock + DIY ticker", settings: "Obtain each lock, then one goroutine per lock: time.NewTicker(TTL/3) → Lock.Refresh(ctx, TTL, nil)",
			hold: holdDIY},
	}
}

type heldConfig struct {
	name, settings string
	hold           func(ctx context.Context, rdb *redis.Client, keys []string, ttl time.Duration) (*holding, error)
}

// measureHeld holds len(keys) locks, then observes them for the observation window: memory and
// goroutines per lock, and what keeping them alive costs per renewal interval.
func (h *harness) measureHeld(ctx context.Context, hc heldConfig, round int) (metrics, error) {
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
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	hctx, cancel := context.WithTimeout(ctx, holdLimit)
	hd, err := hc.hold(hctx, rg.rdbs[0], keys, h.p.heldTTL)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hc.name, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if err := rg.begin(ctx); err != nil {
		_ = hd.release()
		return nil, err
	}
	peak := observeGoroutines(h.p.observe)
	u, err := rg.end(ctx)
	lost := hd.lost()
	if rerr := hd.release(); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hc.name, err)
	}
	n := float64(len(keys))
	intervals := float64(h.p.observe) / float64(h.p.heldTTL/3)
	mem := float64(int64(m1.HeapAlloc+m1.StackInuse)-int64(m0.HeapAlloc+m0.StackInuse)) / n
	return metrics{
		"locks":       n,
		"mem_lock_b":  mem,
		"goroutines":  float64(peak - g0),
		"trips_int":   float64(u.trips) / intervals,
		"top_int":     float64(u.top) / intervals,
		"cpu_int_ms":  float64(u.cpu) / 1000 / intervals,
		"lost":        float64(lost),
		"trips_lock":  float64(u.trips) / intervals / n,
		"intervals":   intervals,
		"observe_sec": h.p.observe.Seconds(),
	}, nil
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

func holdLockkit(ctx context.Context, rdb *redis.Client, keys []string, ttl time.Duration) (*holding, error) {
	bg := context.Background() // releases outlive ctx, which bounds the acquisitions
	c, err := core.New(rdb)
	if err != nil {
		return nil, err
	}
	locks := make([]*core.Lock, len(keys))
	err = parallel(acquireWorkers, func(w int) error {
		for i := w; i < len(keys); i += acquireWorkers {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("acquire lock %d of %d: %w", i+1, len(keys), err)
			}
			// A lock's context derives from Acquire's: give it one that outlives the acquisitions.
			l, err := c.Acquire(bg, keys[i], ttl)
			if err != nil {
				return fmt.Errorf("acquire lock %d of %d: %w", i+1, len(keys), err)
			}
			locks[i] = l
		}
		return nil
	})
	closeCtx := func() error {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return c.Close(cctx)
	}
	if err != nil {
		_ = closeCtx()
		return nil, err
	}
	return &holding{
		lost: func() int {
			n := 0
			for _, l := range locks {
				if l.Context().Err() != nil {
					n++
				}
			}
			return n
		},
		release: func() error {
			err := parallel(acquireWorkers, func(w int) error {
				for i := w; i < len(locks); i += acquireWorkers {
					if locks[i] == nil {
						continue
					}
					if err := locks[i].Release(bg); err != nil && !errors.Is(err, core.ErrNotHeld) {
						return err // a lost lock is counted by lost, not an error here
					}
				}
				return nil
			})
			return errors.Join(err, closeCtx())
		},
	}, nil
}

// holdDIY is what redislock's README suggests for long work: a ticker per lock calling Refresh.
// (redsync has the same shape: Mutex.Extend from a goroutine per lock.)
func holdDIY(ctx context.Context, rdb *redis.Client, keys []string, ttl time.Duration) (*holding, error) {
	rc := redislock.New(rdb)
	bg := context.Background() // refreshes and releases outlive ctx, which bounds the acquisitions
	locks := make([]*redislock.Lock, len(keys))
	var lost atomic.Int64
	stop := make(chan struct{})
	var tickers sync.WaitGroup
	err := parallel(acquireWorkers, func(w int) error {
		for i := w; i < len(keys); i += acquireWorkers {
			l, err := rc.Obtain(ctx, keys[i], ttl, nil)
			if err != nil {
				return fmt.Errorf("obtain lock %d of %d while the tickers of those already held refresh: %w", i+1, len(keys), err)
			}
			locks[i] = l
			tickers.Go(func() {
				t := time.NewTicker(ttl / 3)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						if err := l.Refresh(bg, ttl, nil); err != nil {
							lost.Add(1)
							return
						}
					}
				}
			})
		}
		return nil
	})
	release := func() error {
		close(stop)
		tickers.Wait()
		return parallel(acquireWorkers, func(w int) error {
			for i := w; i < len(locks); i += acquireWorkers {
				if locks[i] == nil {
					continue
				}
				if err := locks[i].Release(bg); err != nil && !errors.Is(err, redislock.ErrLockNotHeld) {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		_ = release()
		return nil, err
	}
	return &holding{lost: func() int { return int(lost.Load()) }, release: release}, nil
}
