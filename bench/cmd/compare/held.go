package main

import (
	"context"
	"errors"
	"fmt"
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
	lost func() int // locks lost so far
	// release releases everything and stops what hold started; it returns the mean latency of one
	// release (acquireWorkers at a time, while the locks not yet released are kept alive).
	release func() (time.Duration, error)
}

// heldLib is one library holding many locks over one go-redis client.
type heldLib interface {
	// hold takes every key (bounded by ctx) and keeps the locks alive until their release.
	hold(ctx context.Context, keys []string, ttl time.Duration) (*holding, error)
	// once takes key and releases it: the foreground acquire and release, timed apart.
	once(ctx context.Context, key string, ttl time.Duration) (acq, rel time.Duration, err error)
	close() error
}

// heldConfigs are the ways to keep many locks alive. The last row is lockkit alone at a short TTL
// (issue #38): the DIY ticker would need a refresh per lock per second, which saturates a 2-core
// machine.
func heldConfigs(p params) []heldConfig {
	return []heldConfig{
		{name: "lockkit", settings: "core.New(rdb); Acquire each lock once; the client's one watchdog renews them all (pipelined batches of up to 1000)",
			open: openLockkitHeld},
		{name: "redislock + DIY ticker", settings: "Obtain each lock, then one goroutine per lock: time.NewTicker(TTL/3) → Lock.Refresh(ctx, TTL, nil)",
			open: openDIYHeld},
		{name: heldFastName(p), settings: fmt.Sprintf("as lockkit, with a TTL of %s, observed for %s", p.heldFastTTL, p.heldFastObserve),
			open: openLockkitHeld, ttl: p.heldFastTTL, observe: p.heldFastObserve},
	}
}

// heldFastName names the row of lockkit at the short TTL.
func heldFastName(p params) string { return fmt.Sprintf("lockkit (%s TTL)", p.heldFastTTL) }

type heldConfig struct {
	name, settings string
	open           func(rdb *redis.Client) (heldLib, error)
	ttl, observe   time.Duration // 0: the run's heldTTL and observe
}

// lockkitHeld is one core.Client.
type lockkitHeld struct{ c *core.Client }

func openLockkitHeld(rdb *redis.Client) (heldLib, error) {
	c, err := core.New(rdb)
	if err != nil {
		return nil, err
	}
	return &lockkitHeld{c: c}, nil
}

func (lh *lockkitHeld) once(ctx context.Context, key string, ttl time.Duration) (acq, rel time.Duration, err error) {
	t0 := time.Now()
	l, err := lh.c.Acquire(ctx, key, ttl)
	t1 := time.Now()
	if err != nil {
		return 0, 0, err
	}
	err = l.Release(ctx)
	return t1.Sub(t0), time.Since(t1), err
}

func (lh *lockkitHeld) close() error {
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return lh.c.Close(cctx)
}

func (lh *lockkitHeld) hold(ctx context.Context, keys []string, ttl time.Duration) (*holding, error) {
	bg := context.Background() // releases outlive ctx, which bounds the acquisitions
	c := lh.c
	locks := make([]*core.Lock, len(keys))
	err := parallel(acquireWorkers, func(w int) error {
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
	if err != nil {
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
		release: func() (time.Duration, error) {
			return timedParallel(len(locks), func(i int) error {
				if locks[i] == nil {
					return nil
				}
				if err := locks[i].Release(bg); err != nil && !errors.Is(err, core.ErrNotHeld) {
					return err // a lost lock is counted by lost, not an error here
				}
				return nil
			})
		},
	}, nil
}

// timedParallel runs release(i) for i in [0, n) on acquireWorkers goroutines and returns the mean
// duration of one call.
func timedParallel(n int, release func(i int) error) (time.Duration, error) {
	var total atomic.Int64
	err := parallel(acquireWorkers, func(w int) error {
		for i := w; i < n; i += acquireWorkers {
			t0 := time.Now()
			err := release(i)
			total.Add(int64(time.Since(t0)))
			if err != nil {
				return err
			}
		}
		return nil
	})
	if n == 0 {
		return 0, err
	}
	return time.Duration(total.Load() / int64(n)), err
}

// diyHeld is what redislock's README suggests for long work: a ticker per lock calling Refresh.
// (redsync has the same shape: Mutex.Extend from a goroutine per lock.)
type diyHeld struct{ rc *redislock.Client }

func openDIYHeld(rdb *redis.Client) (heldLib, error) { return &diyHeld{rc: redislock.New(rdb)}, nil }

func (d *diyHeld) once(ctx context.Context, key string, ttl time.Duration) (acq, rel time.Duration, err error) {
	t0 := time.Now()
	l, err := d.rc.Obtain(ctx, key, ttl, nil)
	t1 := time.Now()
	if err != nil {
		return 0, 0, err
	}
	err = l.Release(ctx)
	return t1.Sub(t0), time.Since(t1), err
}

func (d *diyHeld) close() error { return nil }

func (d *diyHeld) hold(ctx context.Context, keys []string, ttl time.Duration) (*holding, error) {
	bg := context.Background() // refreshes and releases outlive ctx, which bounds the acquisitions
	locks := make([]*redislock.Lock, len(keys))
	var lost atomic.Int64
	stop := make(chan struct{})
	var tickers sync.WaitGroup
	err := parallel(acquireWorkers, func(w int) error {
		for i := w; i < len(keys); i += acquireWorkers {
			l, err := d.rc.Obtain(ctx, keys[i], ttl, nil)
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
	release := func() (time.Duration, error) {
		close(stop)
		tickers.Wait()
		return timedParallel(len(locks), func(i int) error {
			if locks[i] == nil {
				return nil
			}
			if err := locks[i].Release(bg); err != nil && !errors.Is(err, redislock.ErrLockNotHeld) {
				return err
			}
			return nil
		})
	}
	if err != nil {
		_, _ = release()
		return nil, err
	}
	return &holding{lost: func() int { return int(lost.Load()) }, release: release}, nil
}
