package httpmw_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// lockedAPI serves h on "PUT /orders/{id}" behind KeyLock on the id, prefixed "order/".
func lockedAPI(t testing.TB, locks *core.Client, h http.Handler, opts ...httpmw.Option) string {
	t.Helper()
	key := func(r *http.Request) (string, error) {
		if id := r.PathValue("id"); id != "-" {
			return "order/" + id, nil
		}
		return "", nil
	}
	mux := http.NewServeMux()
	mux.Handle("PUT /orders/{id}", httpmw.KeyLock(locks, key, opts...)(h))
	return serve(t, mux).URL
}

// TestKeyLock_serialises sends 50 concurrent requests on one key over two replicas: they never
// overlap, and each sees a larger fence than the one before.
func TestKeyLock_serialises(t *testing.T) {
	srv := redistest.Start(t)
	var inside, maxInside atomic.Int64
	var mu sync.Mutex
	var fences []int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inside.Add(1)
		defer inside.Add(-1)
		for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
		}
		l, ok := core.FromContext(r.Context())
		if !ok || l.Name() != "@http/order/42" {
			http.Error(w, "no lock in the context", 500)
			return
		}
		mu.Lock()
		fences = append(fences, l.Fence())
		mu.Unlock()
		time.Sleep(time.Millisecond) // the work: overlapping requests would be caught inside here
	})
	var urls []string
	for range 2 {
		urls = append(urls, lockedAPI(t, locktest.NewClient(t, srv.Client(t)), h, httpmw.WithWait(30*time.Second)))
	}
	const n = 50
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		go func() {
			<-start
			r, err := request("PUT", urls[i%2]+"/orders/42", "", "")
			if err == nil && r.status != 200 {
				err = fmt.Errorf("status %d: %s", r.status, r.body)
			}
			errs <- err
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if maxInside.Load() != 1 {
		t.Fatalf("%d requests ran at once on one key", maxInside.Load())
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fences not increasing: %v", fences)
		}
	}
}

// TestKeyLock_differentKeysInParallel proves overlap: each handler waits until all of them are
// inside, which only happens if requests on different keys run at the same time.
func TestKeyLock_differentKeysInParallel(t *testing.T) {
	_, locks := setup(t)
	const n = 5
	var arrived atomic.Int64
	all := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			http.Error(w, "requests on different keys did not overlap", 500)
		}
	})
	url := lockedAPI(t, locks, h)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			r, err := request("PUT", url+"/orders/"+strconv.Itoa(i), "", "")
			if err == nil && r.status != 200 {
				err = fmt.Errorf("status %d: %s", r.status, r.body)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestKeyLock_contended(t *testing.T) {
	srv, locks := setup(t)
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	held, err := locks.Acquire(context.Background(), "order/1", 10*time.Second, core.InNamespace("http"))
	if err != nil {
		t.Fatal(err)
	}
	waiting := lockedAPI(t, locks, h, httpmw.WithWait(100*time.Millisecond))
	r := send(t, "PUT", waiting+"/orders/1", "", "")
	wantProblem(t, r, 409, "resource-locked")
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 10 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	rejecting := lockedAPI(t, locks, h, httpmw.WithWait(0))
	srv.ResetStats(t)
	wantProblem(t, send(t, "PUT", rejecting+"/orders/1", "", ""), 409, "resource-locked")
	if n := roundTrips(t, srv); n != 1 {
		t.Fatalf("rejecting at once took %d round trips", n)
	}
	// A waiter gets the lock when the holder releases it.
	done := make(chan response, 1)
	patient := lockedAPI(t, locks, h, httpmw.WithWait(10*time.Second))
	go func() { r, _ := request("PUT", patient+"/orders/1", "", ""); done <- r }()
	locktest.Eventually(t, 5*time.Second, "the request to wait", func() bool {
		return fmt.Sprint(srv.Do(t, "PUBSUB", "CHANNELS")) != "[]"
	})
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.status != 200 || calls.Load() != 1 {
		t.Fatalf("waiter: %+v, calls %d", r, calls.Load())
	}
}

// TestKeyLock_waitEndsWithTheRequest: a wait (here 30 s) never outlasts the request's context.
func TestKeyLock_waitEndsWithTheRequest(t *testing.T) {
	_, locks := setup(t)
	held, err := locks.Acquire(context.Background(), "order/1", 10*time.Second, core.InNamespace("http"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	mw := httpmw.KeyLock(locks, httpmw.ByPathValue("id"), httpmw.WithWait(30*time.Second))(http.NotFoundHandler())
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest("PUT", "/orders/1", nil).WithContext(ctx)
	req.SetPathValue("id", "order/1")
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { mw.ServeHTTP(w, req); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(4 * time.Second):
		t.Fatal("the wait went on after the request's context ended")
	}
	if w.Code != http.StatusConflict {
		t.Fatalf("status %d", w.Code)
	}
}

func TestKeyLock_keys(t *testing.T) {
	srv, locks := setup(t)
	var got []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, ok := core.FromContext(r.Context())
		if ok {
			got = append(got, l.Name())
		} else {
			got = append(got, "-")
		}
	})
	bad := func(r *http.Request) (string, error) { return "", errors.New("order id must be a number") }
	mux := http.NewServeMux()
	mux.Handle("PUT /a/{id}", httpmw.KeyLock(locks, httpmw.ByPathValue("id"))(h))
	mux.Handle("PUT /b", httpmw.KeyLock(locks, httpmw.ByHeader("x-order"))(h))
	mux.Handle("PUT /c", httpmw.KeyLock(locks, httpmw.ByQuery("order"))(h))
	mux.Handle("PUT /d", httpmw.KeyLock(locks, bad)(h))
	url := serve(t, mux).URL
	send(t, "PUT", url+"/a/6", "", "") // loads the scripts
	srv.ResetStats(t)
	send(t, "PUT", url+"/a/7", "", "")
	if n := roundTrips(t, srv); n != 2 {
		t.Fatalf("uncontended request: %d round trips, want 2", n)
	}
	send(t, "PUT", url+"/b", "", "", "X-Order", "8")
	send(t, "PUT", url+"/c?order=9", "", "")
	send(t, "PUT", url+"/c", "", "") // no key: no lock
	if fmt.Sprint(got) != "[@http/6 @http/7 @http/8 @http/9 -]" {
		t.Fatalf("locks held: %v", got)
	}
	r := send(t, "PUT", url+"/d", "", "")
	wantProblem(t, r, 400, "lock-key-invalid")
	if len(got) != 5 {
		t.Fatalf("handler ran for invalid keys: %v", got)
	}
	// Inside the namespace any bytes are a name, "}x" too.
	send(t, "PUT", url+"/a/%7Dx", "", "")
	if got[5] != "@http/}x" {
		t.Fatalf("lock %q", got[5])
	}
}

// A path value that spells another component's lock name locks a name of KeyLock's namespace:
// a request cannot hold (and so suppress) a cron job, an asynq key or an idempotency key.
func TestKeyLock_inputCannotReachAnotherNamespace(t *testing.T) {
	_, locks := setup(t)
	ctx := context.Background()
	for _, other := range []struct{ ns, name string }{{"cron", "billing"}, {"asynq", "invoice"}, {"grpc", "order/42"}} {
		l, err := locks.TryAcquire(ctx, other.name, time.Minute, core.InNamespace(other.ns))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
	}
	var got []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, _ := core.FromContext(r.Context())
		got = append(got, l.Name())
	})
	mux := http.NewServeMux()
	mux.Handle("PUT /orders/{id}", httpmw.KeyLock(locks, httpmw.ByPathValue("id"), httpmw.WithWait(0))(h))
	mux.Handle("PUT /jobs/{id}", httpmw.KeyLock(locks, httpmw.ByPathValue("id"), httpmw.WithWait(0), httpmw.WithNamespace("cron"))(h))
	url := serve(t, mux).URL
	for _, hostile := range []string{"cron%2Fbilling", "%40cron%2Fbilling", "cron:billing", "asynq:invoice",
		"%40asynq%2Finvoice", "%40grpc%2Forder%2F42", "..%2F%40cron%2Fbilling", "%7B%40cron%2Fbilling%7D"} {
		if r := send(t, "PUT", url+"/orders/"+hostile, "", ""); r.status != 200 {
			t.Fatalf("%s: %d %s (blocked by another component's lock)", hostile, r.status, r.body)
		}
	}
	for _, name := range got {
		if !strings.HasPrefix(name, "@http/") {
			t.Fatalf("lock %q outside KeyLock's namespace", name)
		}
	}
	// Locking another component's name takes an explicit namespace.
	wantProblem(t, send(t, "PUT", url+"/jobs/billing", "", ""), 409, "resource-locked")
}

func TestKeyLock_redisDown(t *testing.T) {
	srv := redistest.Start(t)
	locks := locktest.NewClient(t, downClient(t, srv))
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	closed, open := lockedAPI(t, locks, h), lockedAPI(t, locks, h, httpmw.FailOpen())
	srv.Stop(t)
	wantProblem(t, send(t, "PUT", closed+"/orders/1", "", ""), 503, "lock-unavailable")
	if r := send(t, "PUT", open+"/orders/1", "", ""); r.status != 200 || calls.Load() != 1 {
		t.Fatalf("fail-open: %+v, calls %d", r, calls.Load())
	}
}

func TestKeyLock_panicReleases(t *testing.T) {
	_, locks := setup(t)
	var lockCtx context.Context
	mw := httpmw.KeyLock(locks, httpmw.ByPathValue("id"))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lockCtx = r.Context()
		panic(http.ErrAbortHandler)
	}))
	req := httptest.NewRequest("PUT", "/orders/1", nil)
	req.SetPathValue("id", "p")
	if p := servePanic(mw, req); p != http.ErrAbortHandler {
		t.Fatalf("panic %v", p)
	}
	if !errors.Is(context.Cause(lockCtx), core.ErrReleased) {
		t.Fatalf("lock context cause %v, want released", context.Cause(lockCtx))
	}
	l, err := locks.TryAcquire(context.Background(), "p", time.Second, core.InNamespace("http"))
	if err != nil {
		t.Fatalf("lock still held after the panic: %v", err)
	}
	l.Release(context.Background())
}
