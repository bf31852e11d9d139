package election_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/redis/go-redis/v9"
)

func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	locks, _ := core.New(rdb)
	defer locks.Close(ctx)
	el, err := election.New(locks, rdb, "scheduler")
	if err != nil {
		log.Fatal(err)
	}

	// Observers (any process) see each leader and its fence.
	go func() {
		for ld := range el.Observe(ctx) {
			log.Printf("leader: %q (fence %d)", ld.Value, ld.Fence)
		}
	}()

	// Wait to lead, then lead until the term ends.
	term, err := el.Campaign(ctx, "host-a:8080")
	if err != nil {
		log.Fatal(err)
	}
	defer term.Resign(context.WithoutCancel(ctx))
	runScheduler(term.Context(), term.Fence()) // returns when leadership is lost
}

func runScheduler(ctx context.Context, fence int64) { <-ctx.Done() }

// A leader hands over at least every hour: its term ends with a cause matching core.ErrMaxHold,
// and it campaigns again, behind the campaigners already waiting.
func ExampleWithMaxTerm() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	locks, _ := core.New(rdb)
	defer locks.Close(ctx)
	el, err := election.New(locks, rdb, "rotating", election.WithMaxTerm(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	for {
		term, err := el.Campaign(ctx, "host-a:8080")
		if err != nil {
			log.Fatal(err)
		}
		runScheduler(term.Context(), term.Fence())
		if cause := context.Cause(term.Context()); !errors.Is(cause, core.ErrMaxHold) {
			log.Fatalf("leadership ended: %v", cause)
		}
	}
}
