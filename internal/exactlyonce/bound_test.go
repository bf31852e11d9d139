package exactlyonce_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/exactlyonce"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// Issue #18: a client that sends a new idempotency key with every request leaves nothing behind once
// the records' retention passed — no record, no lock, no fence counter, no receipt.
func TestStore_10000Keys_leaveNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 10 000 records and waits for their retention (~15s)")
	}
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locks := locktest.NewClient(t, rdb)
	s := newStore(t, locks, exactlyonce.Config{Retention: time.Second})
	ctx := context.Background()
	const keys, workers = 10_000, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < keys; i += workers {
				req := &exactlyonce.Request{Key: s.Key("POST", "/orders", "alice", "key-"+strconv.Itoa(i)), Fingerprint: fp("body")}
				run, _, err := s.Begin(ctx, req)
				if err == nil {
					err = run.Store(ctx, exactlyonce.Encode('r', [32]byte{1}, []byte(`{"order":42}`)), time.Second)
				}
				if err != nil {
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
	if n := rdb.DBSize(ctx).Val(); n < keys {
		t.Fatalf("%d keys right after %d stored records: the test proves nothing", n, keys)
	}
	peak := rdb.DBSize(ctx).Val()
	locktest.Eventually(t, 30*time.Second, "every key to expire", func() bool { return rdb.DBSize(ctx).Val() == 0 })
	t.Logf("%d idempotency keys: %d Redis keys right after, 0 after retention", keys, peak)
}
