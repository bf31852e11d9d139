package core_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// Two clients with separate connection pools, 32 goroutines each, increment a counter stored in
// Redis with a non-atomic GET then SET inside the lock. Any overlap loses an increment.
func TestMutualExclusion_twoClients(t *testing.T) {
	srv := redistest.Start(t)
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	plain := srv.Client(t)
	const perClient, rounds = 32, 8
	var (
		mu     sync.Mutex
		fences []int64
		wg     sync.WaitGroup
		errs   = make(chan error, 2*perClient)
	)
	for _, c := range []*core.Client{a, b} {
		for range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					err := c.Do(context.Background(), "counter", 2*time.Second, func(ctx context.Context) error {
						v, err := plain.Get(ctx, "counter").Int64()
						if err != nil && err.Error() != "redis: nil" {
							return err
						}
						l, _ := core.FromContext(ctx)
						mu.Lock()
						fences = append(fences, l.Fence())
						mu.Unlock()
						return plain.Set(ctx, "counter", strconv.FormatInt(v+1, 10), 0).Err()
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := plain.Get(context.Background(), "counter").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(2 * perClient * rounds); got != want {
		t.Fatalf("counter = %d, want %d: critical sections overlapped", got, want)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d at #%d after %d: not strictly increasing in acquisition order", fences[i], i, fences[i-1])
		}
	}
}
