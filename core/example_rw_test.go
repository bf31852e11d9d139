package core_test

import (
	"context"
	"errors"
	"log"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

func ExampleRead() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	defer locks.Close(ctx)

	// Any number of readers of "catalog" at once, across every process; never with a writer.
	err := locks.Do(ctx, "catalog", 10*time.Second, func(ctx context.Context) error {
		r, _ := core.FromContext(ctx) // the read hold: its own token, lease and fence
		return catalog.read(ctx, r.Fence())
	}, core.Read())
	if errors.Is(err, core.ErrLost) {
		log.Print("the read hold was lost: a writer may have changed the catalog meanwhile")
	}
}

func ExampleWrite() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	defer locks.Close(ctx)

	// One writer, no reader. Readers that come after a waiting writer wait behind it.
	err := locks.Do(ctx, "catalog", 10*time.Second, func(ctx context.Context) error {
		w, _ := core.FromContext(ctx)
		if err := catalog.write(ctx, w.Fence()); err != nil {
			return err
		}
		// A read through the write hold's context is nested in it: no round trip, same fence.
		// (A Write through a read hold's context is refused with ErrInvalid: no upgrade.)
		return locks.Do(ctx, "catalog", 10*time.Second, func(ctx context.Context) error {
			r, _ := core.FromContext(ctx)
			return catalog.read(ctx, r.Fence())
		}, core.Read())
	}, core.Write())
	if err != nil {
		log.Print(err)
	}
}

// fencedCatalog is a resource that refuses stale holders of the read-write lock "catalog": it
// records the highest fence a writer brought (w) and the highest any holder brought (all).
type fencedCatalog struct {
	mu     sync.Mutex
	w, all int64
}

var catalog = &fencedCatalog{}

var errStale = errors.New("stale fence")

// write refuses a writer whose fence is below one already seen: someone was granted the lock
// after it, so it lost the lock.
func (c *fencedCatalog) write(_ context.Context, fence int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fence < c.all {
		return errStale
	}
	c.w, c.all = fence, fence
	return nil
}

// read refuses a reader whose fence is below a writer's: it outlived that writer's turn.
func (c *fencedCatalog) read(_ context.Context, fence int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fence < c.w {
		return errStale
	}
	c.all = max(c.all, fence)
	return nil
}
