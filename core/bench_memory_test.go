package core_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// usedMemory is the redis-server's used_memory (INFO memory), in bytes.
func usedMemory(tb testing.TB, srv *redistest.Server) int64 {
	tb.Helper()
	info, _ := srv.Do(tb, "INFO", "memory").(string)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("no used_memory in INFO memory")
	return 0
}

// BenchmarkMemory_heldLock reports the Redis memory a held lock costs (its one string key; a name
// of 16 bytes), as B/lock: the capacity a Redis needs per concurrently held lock.
func BenchmarkMemory_heldLock(b *testing.B) {
	srv := redistest.Start(b)
	c := locktest.NewClient(b, srv.Client(b))
	ctx := context.Background()
	locks := make([]*core.Lock, 0, b.N)
	before := usedMemory(b, srv)
	b.ResetTimer()
	for i := range b.N {
		l, err := c.TryAcquire(ctx, "order:"+strconv.Itoa(1_000_000_000+i), time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		locks = append(locks, l)
	}
	b.StopTimer()
	b.ReportMetric(float64(usedMemory(b, srv)-before)/float64(b.N), "B/lock")
	for _, l := range locks {
		_ = l.Release(ctx)
	}
}
