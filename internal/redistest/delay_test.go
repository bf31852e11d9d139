package redistest_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
)

func TestDelayProxy(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	const d = 50 * time.Millisecond
	p := s.StartDelayProxy(t, d)
	c := redis.NewClient(p.Options())
	defer c.Close()
	for i := range 3 {
		start := time.Now()
		if err := c.Set(ctx(t, 5*time.Second), "lockkit:k", i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < d {
			t.Fatalf("round trip %d through the proxy took %v, want at least %v", i, took, d)
		}
	}
	if got := s.Do(t, "GET", "lockkit:k"); got != "2" {
		t.Fatalf("GET = %v, want 2 (requests pass through in order)", got)
	}
}
