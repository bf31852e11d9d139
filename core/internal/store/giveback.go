package store

import (
	"context"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core/internal/pipe"
	"github.com/lockkit/lockkit/core/internal/wait"
)

// GiveBacks releases, in the background, holds that an acquisition may have taken although its
// reply was lost (a timeout, a cancelled context, a broken connection): otherwise the lock would
// stay taken, by nobody, for its TTL. Close waits for the give-backs under way.
type GiveBacks struct {
	st     Store
	failed func(name string, ttl time.Duration, err error) // a give-back that could not reach Redis
	mu     sync.Mutex
	wg     sync.WaitGroup
	done   bool // Close began: no more give-backs in the background
	ctx    context.Context
	stop   context.CancelFunc
}

// NewGiveBacks returns the give-backs of st; failed hears of each that could not reach Redis.
func NewGiveBacks(st Store, failed func(name string, ttl time.Duration, err error)) *GiveBacks {
	g := &GiveBacks{st: st, failed: failed}
	g.ctx, g.stop = context.WithCancel(context.Background())
	return g
}

// Context bounds other background work of the Client (ended by Close).
func (g *GiveBacks) Context() context.Context { return g.ctx }

// Give releases one hold of token on k (a copy: see Keys.GivenBack). The attempt may still be on
// its way to Redis, so a give-back that finds nothing tries again a little later; an attempt that
// after (its error) says was left queued or in flight in a pipeline is waited for first. Best
// effort, bounded by the lock's TTL (at most 5s); after Close began, one try, at once.
func (g *GiveBacks) Give(k Keys, token, hold any, fair bool, ttl time.Duration, after error) {
	var last error // the last attempt's error, if Redis could not be reached
	attempt := func(ctx context.Context) bool {
		res, err := g.st.Release(ctx, ReleaseReq{Keys: &k, Token: token, Hold: hold, Fair: fair, LockTTL: ttl})
		last = err
		return err == nil && res.Left >= 0
	}

	g.mu.Lock()
	closing := g.done
	if !closing {
		g.wg.Go(func() {
			ctx, cancel := context.WithTimeout(g.ctx, min(ttl, 5*time.Second))
			defer cancel()
			pipe.Settle(ctx, after)
			for _, d := range [...]time.Duration{0, 50 * time.Millisecond, 500 * time.Millisecond} {
				if (d > 0 && !wait.Sleep(ctx, d)) || attempt(ctx) {
					return
				}
			}
			if last != nil {
				g.failed(k.Name, ttl, last)
			}
		})
	}
	g.mu.Unlock()
	if closing {
		ctx, cancel := context.WithTimeout(context.Background(), min(ttl, time.Second))
		pipe.Settle(ctx, after)
		attempt(ctx)
		cancel()
	}
}

// Close waits for the give-backs under way, cutting them short when ctx ends, and ends Context.
func (g *GiveBacks) Close(ctx context.Context) {
	g.mu.Lock()
	g.done = true
	g.mu.Unlock()

	cut := context.AfterFunc(ctx, g.stop)
	g.wg.Wait()
	cut()
	g.stop()
}
