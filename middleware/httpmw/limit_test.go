package httpmw_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// WithLimit lets at most n requests of one key run at once over two replicas; the others get 429 with
// Retry-After and the problem document; other keys are not affected.
func TestWithLimit_perKeyConcurrency(t *testing.T) {
	srv := redistest.Start(t)
	var inside atomic.Int64
	entered := make(chan struct{}, 8)
	unblock := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, ok := core.FromContext(r.Context())
		if !ok || l.Limit() != 2 || l.Name() != "@http/tenant/"+r.PathValue("t") {
			http.Error(w, "no permit in the context", 500)
			return
		}
		inside.Add(1)
		defer inside.Add(-1)
		entered <- struct{}{}
		<-unblock
	})
	var urls []string
	for range 2 {
		mux := http.NewServeMux()
		key := func(r *http.Request) (string, error) { return "tenant/" + r.PathValue("t"), nil }
		mux.Handle("GET /t/{t}", httpmw.KeyLock(locktest.NewClient(t, srv.Client(t)), key, httpmw.WithLimit(2), httpmw.WithTTL(5*time.Second))(h))
		urls = append(urls, serve(t, mux).URL)
	}
	done := make(chan error, 2)
	for i := range 2 {
		go func() {
			r, err := request("GET", urls[i]+"/t/a", "", "")
			if err == nil && r.status != 200 {
				err = fmt.Errorf("status %d", r.status)
			}
			done <- err
		}()
	}
	<-entered
	<-entered
	// Full: the third gets 429 at once, with a Retry-After from the permits' TTL.
	r := send(t, "GET", urls[0]+"/t/a", "", "")
	wantProblem(t, r, 429, "concurrency-limit")
	if ra := r.header.Get("Retry-After"); ra != "5" {
		t.Errorf("Retry-After %q, want 5", ra)
	}
	// Another key has its own permits.
	go func() {
		_, err := request("GET", urls[1]+"/t/b", "", "")
		done <- err
	}()
	<-entered
	close(unblock)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if r := send(t, "GET", urls[1]+"/t/a", "", ""); r.status != 200 {
		t.Fatalf("after the others finished: %d", r.status)
	}
}

// WithWait makes a request wait for a permit; it gets one when a running request finishes.
func TestWithLimit_waits(t *testing.T) {
	srv, locks := setup(t)
	release := make(chan struct{})
	first := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("first") != "" {
			close(first)
			<-release
		}
	})
	key := func(*http.Request) (string, error) { return "k", nil }
	url := serve(t, httpmw.KeyLock(locks, key, httpmw.WithLimit(1), httpmw.WithWait(10*time.Second))(h)).URL
	go func() { _, _ = request("GET", url+"/?first=1", "", "") }()
	<-first
	got := make(chan int, 1)
	go func() {
		r, _ := request("GET", url+"/", "", "")
		got <- r.status
	}()
	locktest.Eventually(t, 5*time.Second, "the second request to queue for the permit", func() bool {
		return srv.Do(t, "ZCARD", locktest.Key("@http/k", "permits", "queue")) == int64(1)
	})
	select {
	case s := <-got:
		t.Fatalf("second request answered %d while the permit was taken", s)
	default:
	}
	close(release)
	if s := <-got; s != 200 {
		t.Fatalf("waiting request: %d, want 200", s)
	}
}

func TestWithLimit_invalid(t *testing.T) {
	_, locks := setup(t)
	key := func(*http.Request) (string, error) { return "k", nil }
	for _, n := range []int{0, -1, core.MaxPermits + 1} {
		func() {
			defer func() {
				err, _ := recover().(error)
				want := fmt.Sprintf("lockkit: httpmw: WithLimit(%d) is outside [1, %d]", n, core.MaxPermits)
				if !errors.Is(err, core.ErrInvalid) || err.Error() != want {
					t.Errorf("WithLimit(%d) panicked with %v, want %q matching ErrInvalid", n, err, want)
				}
			}()
			httpmw.KeyLock(locks, key, httpmw.WithLimit(n))
		}()
	}
	httpmw.KeyLock(locks, key, httpmw.WithLimit(core.MaxPermits)) // the bound itself is fine
}
