package core_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

func ExamplePermits() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	defer locks.Close(ctx)

	// At most 4 exports run at once, across every process; a 5th waits for a release.
	err := locks.Do(ctx, "exports", time.Minute, func(ctx context.Context) error {
		p, _ := core.FromContext(ctx) // the permit: its own token, fence and lease
		log.Printf("exporting under permit fence %d (limit %d)", p.Fence(), p.Limit())
		return nil // ctx is cancelled if the permit is lost
	}, core.Permits(4))
	if errors.Is(err, core.ErrLost) {
		log.Print("the permit was lost while the export ran")
	}

	// Or try once: a *core.NotAcquiredError says when the earliest permit expires at the latest.
	p, err := locks.TryAcquire(ctx, "exports", time.Minute, core.Permits(4))
	var na *core.NotAcquiredError
	if errors.As(err, &na) {
		log.Printf("all 4 permits taken; retry in %v", na.RetryAfter)
		return
	}
	defer p.Release(ctx)
}
