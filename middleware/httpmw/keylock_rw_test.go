package httpmw_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/middleware/httpmw"
	"github.com/redis/go-redis/v9"
)

// With WithReadWrite, GETs of one key run together (each handler waits until both are inside),
// over two replicas; a PUT waits for them and runs alone; a GET sent while the PUT waits runs
// after it (first come, first served); and a PUT that cannot wait gets 409.
func TestKeyLock_readWrite(t *testing.T) {
	srv, _ := setup(t)
	inside := make(chan string, 8)
	unblock := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, ok := core.FromContext(r.Context())
		if !ok || l.Name() != "@http/doc/7" {
			http.Error(w, "no hold in the context", 500)
			return
		}
		inside <- r.Method + " " + l.Mode()
		if r.Header.Get("X-Block") != "" {
			<-unblock
		}
	})
	key := func(r *http.Request) (string, error) { return "doc/" + r.PathValue("id"), nil }
	var urls []string
	for range 2 {
		mux := http.NewServeMux()
		mux.Handle("/docs/{id}", httpmw.KeyLock(locktest.NewClient(t, srv.Client(t)), key, httpmw.WithReadWrite(),
			httpmw.WithWait(10*time.Second))(h))
		urls = append(urls, serve(t, mux).URL)
	}
	done := make(chan error, 8)
	send := func(method, url string, block bool) {
		go func() {
			var hs []string
			if block {
				hs = []string{"X-Block", "1"}
			}
			r, err := request(method, url+"/docs/7", "", "", hs...)
			if err == nil && r.status != 200 {
				err = fmt.Errorf("%s: status %d: %s", method, r.status, r.body)
			}
			done <- err
		}()
	}
	next := func(what string) string {
		t.Helper()
		select {
		case s := <-inside:
			return s
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not run", what)
			return ""
		}
	}
	send("GET", urls[0], true)
	send("HEAD", urls[1], true)
	a, b := next("first read"), next("second read")
	if a+b != "GET readHEAD read" && a+b != "HEAD readGET read" {
		t.Fatalf("inside: %q and %q, want both reads at once", a, b)
	}
	queued := func(n int64) func() bool {
		return func() bool { return srv.Do(t, "ZCARD", locktest.Key("@http/doc/7", "rw", "queue")) == n }
	}
	send("PUT", urls[0], false)
	locktest.Eventually(t, 5*time.Second, "the PUT to queue", queued(1))
	send("GET", urls[1], false)
	locktest.Eventually(t, 5*time.Second, "the later GET to queue behind it", queued(2))
	// A PUT that cannot wait is answered at once.
	wantProblem(t, sendNoWait(t, srv.Client(t), "DELETE"), 409, "resource-locked")
	close(unblock)
	for _, want := range []string{"PUT write", "GET read"} {
		if got := next(want); got != want {
			t.Fatalf("ran %q, want %q (arrival order)", got, want)
		}
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// sendNoWait sends method to a KeyLock with WithReadWrite that does not wait.
func sendNoWait(t *testing.T, rdb *redis.Client, method string) response {
	t.Helper()
	key := func(r *http.Request) (string, error) { return "doc/" + r.PathValue("id"), nil }
	mux := http.NewServeMux()
	mux.Handle("/docs/{id}", httpmw.KeyLock(locktest.NewClient(t, rdb), key, httpmw.WithReadWrite(), httpmw.WithWait(0))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	r, err := request(method, serve(t, mux).URL+"/docs/7", "", "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// KeyLock refuses WithReadWrite with WithLimit (a semaphore has no read side) and with WithKeys (a
// set of locks has none either), and Idempotency refuses it.
func TestWithReadWrite_refusedCombinations(t *testing.T) {
	_, locks := setup(t)
	for name, build := range map[string]func(){
		"WithLimit":   func() { httpmw.KeyLock(locks, httpmw.ByPathValue("id"), httpmw.WithLimit(2), httpmw.WithReadWrite()) },
		"WithKeys":    func() { httpmw.KeyLock(locks, nil, transferKeys(), httpmw.WithReadWrite()) },
		"Idempotency": func() { httpmw.Idempotency(locks, httpmw.WithReadWrite()) },
	} {
		if err, _ := panicOf(build).(error); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%s: panicked with %v, want ErrInvalid", name, err)
		}
	}
}

// One name, one lock: a KeyLock with WithReadWrite, one without and one with WithLimit on the same
// key exclude each other. While a GET holds the read side of doc/7, a plain KeyLock's request and a
// WithLimit request for doc/7 get 409 / 429 (they do not wait), and once the GET is done they run.
func TestKeyLock_kindsOnOneKeyExcludeEachOther(t *testing.T) {
	srv, _ := setup(t)
	key := func(r *http.Request) (string, error) { return "doc/" + r.PathValue("id"), nil }
	inside, unblock := make(chan struct{}, 1), make(chan struct{})
	rw := http.NewServeMux()
	rw.Handle("/docs/{id}", httpmw.KeyLock(locktest.NewClient(t, srv.Client(t)), key, httpmw.WithReadWrite())(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { inside <- struct{}{}; <-unblock })))
	plain := http.NewServeMux()
	plain.Handle("/docs/{id}", httpmw.KeyLock(locktest.NewClient(t, srv.Client(t)), key, httpmw.WithWait(0))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	limited := http.NewServeMux()
	limited.Handle("/docs/{id}", httpmw.KeyLock(locktest.NewClient(t, srv.Client(t)), key, httpmw.WithLimit(5), httpmw.WithWait(0))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	rwURL, plainURL, limitedURL := serve(t, rw).URL, serve(t, plain).URL, serve(t, limited).URL
	done := make(chan error, 1)
	go func() {
		r, err := request("GET", rwURL+"/docs/7", "", "")
		if err == nil && r.status != 200 {
			err = fmt.Errorf("GET: status %d: %s", r.status, r.body)
		}
		done <- err
	}()
	select {
	case <-inside:
	case <-time.After(5 * time.Second):
		t.Fatal("the GET did not run")
	}
	for url, status := range map[string]int{plainURL: 409, limitedURL: 429} {
		r, err := request("POST", url+"/docs/7", "", "")
		if err != nil || r.status != status {
			t.Fatalf("%s while a read holds doc/7: %v, %v; want %d", url, r.status, err, status)
		}
	}
	close(unblock)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{plainURL, limitedURL} {
		r, err := request("POST", url+"/docs/7", "", "")
		if err != nil || r.status != 200 {
			t.Fatalf("%s once the read is done: %v, %v; want 200", url, r.status, err)
		}
	}
}
