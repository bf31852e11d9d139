package lockkittest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/lockkittest"
)

// rebuildIndex stands for the code under test: it works under a lock of the client it is given.
func rebuildIndex(ctx context.Context, locks *core.Client) error {
	return locks.Do(ctx, "index", 30*time.Second, func(ctx context.Context) error {
		return nil // the work, done with the lock's context
	})
}

// A test of code that takes a *core.Client gets one with a single call and needs no Redis; the
// client and its server are closed when the test ends.
func ExampleNewClient() {
	testRebuildIndex := func(t *testing.T) { // func TestRebuildIndex(t *testing.T) in your tests
		locks := lockkittest.NewClient(t)
		if err := rebuildIndex(t.Context(), locks); err != nil {
			t.Fatal(err)
		}
	}
	_ = testRebuildIndex
}

// Two clients of one server contend for a lock as two processes would; FastForward makes a held
// lock expire, and its holder sees the loss through the lock's context.
func ExampleServer() {
	testContention := func(t *testing.T) { // func TestContention(t *testing.T) in your tests
		srv := lockkittest.NewServer(t)
		a, b := srv.Client(t), srv.Client(t)

		l, err := a.TryAcquire(t.Context(), "report", 3*time.Second) // renewed every second
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryAcquire(t.Context(), "report", 3*time.Second); !errors.Is(err, core.ErrNotAcquired) {
			t.Fatalf("second process: %v, want ErrNotAcquired", err)
		}

		srv.Miniredis().FastForward(time.Minute) // the TTL runs out before the next renewal
		<-l.Context().Done()                     // cancelled by the next renewal
		if !errors.Is(context.Cause(l.Context()), core.ErrLost) {
			t.Fatalf("cause %v, want ErrLost", context.Cause(l.Context()))
		}
	}
	_ = testContention
}

// A program that should run without a Redis to install (a demo, a local tool) starts the embedded
// server itself and closes it when done.
func ExampleStartServer() {
	srv, err := lockkittest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	err = locks.Do(context.Background(), "report", 10*time.Second, func(ctx context.Context) error {
		fmt.Println("building the report under the lock")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: building the report under the lock
}
