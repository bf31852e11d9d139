package httpmw_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// orders is the handler of most tests: it counts its calls (the side effect) and answers 201 with
// the call number, the request body and headers that must or must not be replayed.
func orders(calls *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n := calls.Add(1)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", "/orders/"+strconv.FormatInt(n, 10))
		h.Set("Set-Cookie", "session=secret")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"request":%q}`, n, body)
	})
}

// ordersAPI serves orders behind Idempotency on "POST /orders", "PATCH /orders/{id}" and
// "GET /orders".
func ordersAPI(t testing.TB, locks *core.Client, opts ...httpmw.IdempotencyOption) (string, *atomic.Int64) {
	t.Helper()
	calls := new(atomic.Int64)
	idem := httpmw.Idempotency(locks, opts...)
	mux := http.NewServeMux()
	h := idem(orders(calls))
	mux.Handle("POST /orders", h)
	mux.Handle("PATCH /orders/{id}", h)
	mux.Handle("GET /orders", h)
	return serve(t, mux).URL, calls
}

// raw sends a request over a fresh connection and returns the response exactly as it came, minus
// the Date line.
func raw(t *testing.T, url, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`(?m)^Date: .*\r\n`).ReplaceAllString(string(b), "")
}

func TestIdempotency_replay_byteIdentical_roundTrips(t *testing.T) {
	srv, locks := setup(t)
	url, calls := ordersAPI(t, locks)
	req := "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \"order-1\"\r\nAuthorization: Bearer alice\r\n" +
		"Content-Length: 5\r\nConnection: close\r\n\r\npizza"
	send(t, "POST", url+"/orders", "warm-up", "") // loads the scripts
	srv.ResetStats(t)
	first := raw(t, url, req)
	if n := roundTrips(t, srv); n != 2 {
		t.Fatalf("first request: %d round trips, want 2", n)
	}
	srv.ResetStats(t)
	replay := raw(t, url, req)
	if n := roundTrips(t, srv); n != 1 {
		t.Fatalf("replay: %d round trips, want 1", n)
	}
	if calls.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2 (warm-up and first)", calls.Load())
	}
	if !strings.HasPrefix(first, "HTTP/1.1 201 Created\r\n") || !strings.Contains(first, `"request":"pizza"`) {
		t.Fatalf("first response:\n%s", first)
	}
	if strings.Contains(first, "Idempotent-Replayed") || !strings.Contains(replay, "Idempotent-Replayed: true\r\n") {
		t.Fatalf("Idempotent-Replayed wrong:\nfirst:\n%s\nreplay:\n%s", first, replay)
	}
	// Byte-identical, except for the replay marker and the cookie, which is not handed out again.
	want := strings.Replace(first, "Set-Cookie: session=secret\r\n", "", 1)
	got := strings.Replace(replay, "Idempotent-Replayed: true\r\n", "", 1)
	if got != want {
		t.Fatalf("replay differs:\nfirst:\n%q\nreplay:\n%q", want, got)
	}
	// Neither the key nor the credentials reach Redis.
	keys := fmt.Sprint(srv.Do(t, "KEYS", "*"))
	if strings.Contains(keys, "order-1") || strings.Contains(keys, "alice") ||
		!regexp.MustCompile(`lockkit:idem:\{@http-idem/[0-9a-f]{64}\}`).MatchString(keys) {
		t.Fatalf("redis keys: %s", keys)
	}
}

func TestIdempotency_quotedAndBareKeysAreTheSame(t *testing.T) {
	_, locks := setup(t)
	url, calls := ordersAPI(t, locks)
	a := send(t, "POST", url+"/orders", `"k-1"`, "x")
	b := send(t, "POST", url+"/orders", `k-1`, "x")
	c := send(t, "POST", url+"/orders", ` "k-1"	`, "x")
	if a.status != 201 || b.body != a.body || c.body != a.body || calls.Load() != 1 {
		t.Fatalf("calls %d: %+v %+v %+v", calls.Load(), a, b, c)
	}
	if b.header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("bare key did not replay")
	}
}

func TestIdempotency_methods(t *testing.T) {
	_, locks := setup(t)
	url, calls := ordersAPI(t, locks)
	send(t, "GET", url+"/orders", "k", "")
	send(t, "GET", url+"/orders", "k", "")
	if calls.Load() != 2 {
		t.Fatalf("GET ran %d times, want 2: other methods pass through", calls.Load())
	}
	send(t, "PATCH", url+"/orders/7", "k", "")
	if r := send(t, "PATCH", url+"/orders/7", "k", ""); r.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 3 {
		t.Fatalf("PATCH not idempotent: calls %d %+v", calls.Load(), r)
	}
	url, calls = ordersAPI(t, locks, httpmw.WithMethods("get"))
	send(t, "GET", url+"/orders", "k", "")
	send(t, "GET", url+"/orders", "k", "")
	send(t, "POST", url+"/orders", "k", "")
	if calls.Load() != 2 {
		t.Fatalf("WithMethods(GET): %d calls, want 2", calls.Load())
	}
}

func TestIdempotency_missingKey(t *testing.T) {
	_, locks := setup(t)
	url, calls := ordersAPI(t, locks)
	send(t, "POST", url+"/orders", "", "")
	if r := send(t, "POST", url+"/orders", "", ""); r.status != 201 || calls.Load() != 2 {
		t.Fatalf("without a key requests pass through: %+v, calls %d", r, calls.Load())
	}
	url, calls = ordersAPI(t, locks, httpmw.RequireKey())
	wantProblem(t, send(t, "POST", url+"/orders", "", ""), 400, "idempotency-key-missing")
	if r := send(t, "GET", url+"/orders", "", ""); r.status != 201 || calls.Load() != 1 {
		t.Fatalf("GET without key must pass through: %+v", r)
	}
}

func TestIdempotency_malformedKey(t *testing.T) {
	_, locks := setup(t)
	url, calls := ordersAPI(t, locks)
	for _, key := range []string{`"abc`, `""`, `"a\x"`, `a b`, `a,b`, `"a";p=1`, strings.Repeat("k", 256),
		`"` + strings.Repeat("k", 256) + `"`, "\"caf\u00e9\""} {
		wantProblem(t, send(t, "POST", url+"/orders", key, ""), 400, "idempotency-key-malformed")
	}
	r := send(t, "POST", url+"/orders", "", "", "Idempotency-Key", "a", "Idempotency-Key", "b")
	wantProblem(t, r, 400, "idempotency-key-malformed")
	if calls.Load() != 0 {
		t.Fatalf("handler ran %d times for malformed keys", calls.Load())
	}
	if r := send(t, "POST", url+"/orders", strings.Repeat("k", 255), ""); r.status != 201 {
		t.Fatalf("255-character key: %+v", r)
	}
}

func TestIdempotency_fingerprintMismatch(t *testing.T) {
	_, locks := setup(t)
	url, calls := ordersAPI(t, locks, httpmw.WithFingerprintHeaders("X-Tenant"))
	send(t, "POST", url+"/orders", "k", "pizza", "X-Tenant", "a")
	wantProblem(t, send(t, "POST", url+"/orders", "k", "pasta", "X-Tenant", "a"), 422, "idempotency-key-reused")
	wantProblem(t, send(t, "POST", url+"/orders?x=1", "k", "pizza", "X-Tenant", "a"), 422, "idempotency-key-reused")
	wantProblem(t, send(t, "POST", url+"/orders", "k", "pizza", "X-Tenant", "b"), 422, "idempotency-key-reused")
	// Same route pattern, another resource: the URI is part of the fingerprint.
	send(t, "PATCH", url+"/orders/1", "p", "x")
	wantProblem(t, send(t, "PATCH", url+"/orders/2", "p", "x"), 422, "idempotency-key-reused")
	if r := send(t, "POST", url+"/orders", "k", "pizza", "X-Tenant", "a"); r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("matching retry not replayed: %+v", r)
	}
	if calls.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2", calls.Load())
	}
	url, _ = ordersAPI(t, locks, httpmw.ConflictOnMismatch())
	send(t, "POST", url+"/orders", "k", "pizza")
	wantProblem(t, send(t, "POST", url+"/orders", "k", "pasta"), 409, "idempotency-key-reused")
}

// blocking returns a handler that signals entered and waits for release before answering.
func blocking(calls *atomic.Int64, entered chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "done")
	})
}

func TestIdempotency_duplicateInFlight(t *testing.T) {
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			srv, locks := setup(t)
			var opts []httpmw.IdempotencyOption
			if wait {
				opts = append(opts, httpmw.WithWait(10*time.Second))
			}
			var calls atomic.Int64
			entered, release := make(chan struct{}, 2), make(chan struct{})
			url := serve(t, httpmw.Idempotency(locks, opts...)(blocking(&calls, entered, release))).URL
			first := make(chan response, 1)
			go func() { r, _ := request("POST", url, "dup", ""); first <- r }()
			<-entered
			if !wait {
				srv.ResetStats(t)
				r := send(t, "POST", url, "dup", "")
				wantProblem(t, r, 409, "idempotency-key-in-use")
				if n := roundTrips(t, srv); n != 1 {
					t.Fatalf("duplicate: %d round trips, want 1", n)
				}
				if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 10 {
					t.Fatalf("Retry-After %q, want 1..10 (the lock TTL)", r.header.Get("Retry-After"))
				}
				close(release)
			} else {
				second := make(chan response, 1)
				go func() { r, _ := request("POST", url, "dup", ""); second <- r }()
				// The second request waits on the lock (its release channel is subscribed).
				locktest.Eventually(t, 5*time.Second, "the duplicate to wait", func() bool {
					return strings.Contains(fmt.Sprint(srv.Do(t, "PUBSUB", "CHANNELS")), "@http-idem/")
				})
				close(release)
				if r := <-second; r.status != 201 || r.body != "done" || r.header.Get("Idempotent-Replayed") != "true" {
					t.Fatalf("waiting duplicate got %+v, want the replay", r)
				}
			}
			if r := <-first; r.status != 201 {
				t.Fatalf("first: %+v", r)
			}
			if calls.Load() != 1 {
				t.Fatalf("handler ran %d times", calls.Load())
			}
		})
	}
}

func TestIdempotency_scopeIsolation(t *testing.T) {
	_, locks := setup(t)
	url, calls := ordersAPI(t, locks)
	alice := send(t, "POST", url+"/orders", "k", "x", "Authorization", "Bearer alice")
	bob := send(t, "POST", url+"/orders", "k", "x", "Authorization", "Bearer bob")
	anon := send(t, "POST", url+"/orders", "k", "x")
	if calls.Load() != 3 || alice.body == bob.body || bob.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("a key replayed across callers: calls %d", calls.Load())
	}
	for _, c := range []struct {
		who  string
		want response
	}{{"Bearer alice", alice}, {"Bearer bob", bob}, {"", anon}} {
		var r response
		if c.who == "" {
			r = send(t, "POST", url+"/orders", "k", "x")
		} else {
			r = send(t, "POST", url+"/orders", "k", "x", "Authorization", c.who)
		}
		if r.body != c.want.body || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%q got %q, want its own %q", c.who, r.body, c.want.body)
		}
	}
	// A custom principal replaces the Authorization header.
	url, calls = ordersAPI(t, locks, httpmw.WithScope(func(r *http.Request) string { return r.Header.Get("X-User") }))
	a := send(t, "POST", url+"/orders", "k", "x", "X-User", "a", "Authorization", "one")
	b := send(t, "POST", url+"/orders", "k", "x", "X-User", "a", "Authorization", "two")
	send(t, "POST", url+"/orders", "k", "x", "X-User", "b", "Authorization", "one")
	if a.body != b.body || b.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 2 {
		t.Fatalf("WithScope: calls %d, %q %q", calls.Load(), a.body, b.body)
	}
	// The route is part of the scope.
	send(t, "PATCH", url+"/orders/1", "route", "")
	if r := send(t, "POST", url+"/orders", "route", ""); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("key replayed across routes: %+v", r)
	}
}

func TestIdempotency_recordPrefix(t *testing.T) {
	srv := redistest.Start(t)
	locks := locktest.NewClient(t, srv.Client(t), core.WithPrefix("app:"))
	url, _ := ordersAPI(t, locks)
	send(t, "POST", url+"/orders", "k", "")
	url, _ = ordersAPI(t, locks, httpmw.WithRecordPrefix("records:"))
	send(t, "POST", url+"/orders", "k2", "")
	for _, pattern := range []string{"app:idem:{@http-idem/*}", "records:{@http-idem/*}"} {
		if keys := srv.Do(t, "KEYS", pattern).([]any); len(keys) != 1 {
			t.Errorf("KEYS %s = %v, want one record", pattern, keys)
		}
	}
}

// TestIdempotency_waitingDuplicateRunsAfterAFailure: a duplicate waiting on a first request that
// fails with 5xx (not stored) takes the key and runs the handler itself.
func TestIdempotency_waitingDuplicateRunsAfterAFailure(t *testing.T) {
	srv, locks := setup(t)
	var calls atomic.Int64
	entered, release := make(chan struct{}, 2), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			entered <- struct{}{}
			<-release
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	url := serve(t, httpmw.Idempotency(locks, httpmw.WithWait(10*time.Second))(h)).URL
	first := make(chan response, 1)
	go func() { r, _ := request("POST", url, "k", ""); first <- r }()
	<-entered
	second := make(chan response, 1)
	go func() { r, _ := request("POST", url, "k", ""); second <- r }()
	locktest.Eventually(t, 5*time.Second, "the duplicate to wait", func() bool {
		return strings.Contains(fmt.Sprint(srv.Do(t, "PUBSUB", "CHANNELS")), "@http-idem/")
	})
	close(release)
	if r := <-first; r.status != 503 {
		t.Fatalf("first: %+v", r)
	}
	if r := <-second; r.status != 201 || r.header.Get("Idempotent-Replayed") != "" || calls.Load() != 2 {
		t.Fatalf("second: %+v, calls %d", r, calls.Load())
	}
}
