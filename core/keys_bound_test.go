package core_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A service that locks a new name per request (the adapters do, per idempotency key and per task
// key) leaves nothing behind in Redis: after 10 000 distinct names, and the retention of the
// longest-lived key (the fence counter: 10s after the last acquisition), lockkit's key count is
// back at 0. (10 000 names show what 100 000 did, in a fraction of the time: the 10 s retention
// is most of the test.)
func TestKeys_10000Names_leaveNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("drives 10 000 names and waits for their retention (~12s)")
	}
	_, rdb, c := setup(t)
	ctx := context.Background()
	const names, workers = 10_000, 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < names; i += workers {
				l, err := c.TryAcquire(ctx, "req/"+strconv.Itoa(i), time.Second)
				if err != nil {
					errs <- err
					return
				}
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	peak := rdb.DBSize(ctx).Val()
	if peak < 1000 { // one free lock per name, until they expire (the first ones may have)
		t.Fatalf("%d keys right after %d names: the test proves nothing", peak, names)
	}
	eventually(t, 30*time.Second, "every key to expire", func() bool { return rdb.DBSize(ctx).Val() == 0 })
	t.Logf("%d names: %d keys right after, 0 after retention", names, peak)
}
