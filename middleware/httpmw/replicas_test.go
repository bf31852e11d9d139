package httpmw_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// TestIdempotency_twoReplicas_exactlyOnce races 100 requests with one key over two replicas (two
// servers, two core clients, one Redis): the side effect happens once, and every answer is either
// that response (first or replayed, byte for byte) or, without WithWait, a 409.
func TestIdempotency_twoReplicas_exactlyOnce(t *testing.T) {
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			srv := redistest.Start(t)
			var effects atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				n := effects.Add(1)
				time.Sleep(5 * time.Millisecond) // the work: keeps the first request in flight a little
				w.WriteHeader(http.StatusCreated)
				fmt.Fprintf(w, "effect %d for %s", n, body)
			})
			var opts []httpmw.IdempotencyOption
			if wait {
				opts = append(opts, httpmw.WithWait(20*time.Second))
			}
			var urls []string
			for range 2 {
				locks := locktest.NewClient(t, srv.Client(t))
				urls = append(urls, serve(t, httpmw.Idempotency(locks, opts...)(h)).URL)
			}
			const n = 100
			start := make(chan struct{})
			results := make([]response, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					results[i], errs[i] = request("POST", urls[i%2], "same-key", "order")
				}()
			}
			close(start)
			wg.Wait()
			if effects.Load() != 1 {
				t.Fatalf("side effect happened %d times, want exactly once", effects.Load())
			}
			var fresh, replayed, conflicts int
			for i, r := range results {
				switch {
				case errs[i] != nil:
					t.Fatalf("request %d: %v", i, errs[i])
				case r.status == http.StatusConflict && !wait:
					conflicts++
				case r.status != http.StatusCreated || r.body != "effect 1 for order":
					t.Fatalf("request %d: %d %q", i, r.status, r.body)
				case r.header.Get("Idempotent-Replayed") == "true":
					replayed++
				default:
					fresh++
				}
			}
			t.Logf("fresh %d, replayed %d, 409 %d", fresh, replayed, conflicts)
			if fresh != 1 || (wait && replayed != n-1) {
				t.Fatalf("fresh %d replayed %d conflicts %d", fresh, replayed, conflicts)
			}
		})
	}
}
