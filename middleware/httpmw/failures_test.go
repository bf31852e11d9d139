package httpmw_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// failing answers 500 on its first call and 201 after, and 400 for the body "bad".
func failing(calls *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch n := calls.Add(1); {
		case string(b) == "bad":
			http.Error(w, "bad request "+strconv.FormatInt(n, 10), http.StatusBadRequest)
		case n == 1:
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	})
}

func TestIdempotency_serverErrors(t *testing.T) {
	_, locks := setup(t)
	var calls atomic.Int64
	url := serve(t, httpmw.Idempotency(locks)(failing(&calls))).URL
	if r := send(t, "POST", url, "k", ""); r.status != 500 {
		t.Fatalf("first: %+v", r)
	}
	if r := send(t, "POST", url, "k", ""); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after a 500 the key must be free: %+v", r)
	}
	// 4xx are stored.
	a := send(t, "POST", url, "bad", "bad")
	b := send(t, "POST", url, "bad", "bad")
	if a.status != 400 || b.status != 400 || a.body != b.body || b.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("4xx not replayed: %+v %+v", a, b)
	}
	calls.Store(0)
	url = serve(t, httpmw.Idempotency(locks, httpmw.StoreServerErrors())(failing(&calls))).URL
	send(t, "POST", url, "k2", "")
	if r := send(t, "POST", url, "k2", ""); r.status != 500 || r.body != "boom\n" || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("StoreServerErrors: %+v", r)
	}
}

// servePanic calls h directly and returns what it panicked with.
func servePanic(h http.Handler, req *http.Request) (p any) {
	defer func() { p = recover() }()
	h.ServeHTTP(httptest.NewRecorder(), req)
	return nil
}

// newRequest returns a server request with an Idempotency-Key.
func newRequest(method, target, key, body string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("Idempotency-Key", key)
	return r
}

func TestIdempotency_panic(t *testing.T) {
	for _, store := range []bool{false, true} {
		t.Run(fmt.Sprintf("store=%v", store), func(t *testing.T) {
			_, locks := setup(t)
			var opts []httpmw.IdempotencyOption
			if store {
				opts = append(opts, httpmw.StoreServerErrors())
			}
			var calls atomic.Int64
			h := httpmw.Idempotency(locks, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					io.WriteString(w, "partial")
					panic("kaboom")
				}
				w.WriteHeader(http.StatusCreated)
			}))
			if p := servePanic(h, newRequest("POST", "/", "k", "")); p != "kaboom" {
				t.Fatalf("panic value %v, want kaboom re-panicked", p)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, newRequest("POST", "/", "k", ""))
			res := response{status: w.Code, header: w.Header(), body: w.Body.String()}
			if store {
				wantProblem(t, res, 500, "handler-panicked")
				if res.header.Get("Idempotent-Replayed") != "true" || calls.Load() != 1 {
					t.Fatalf("panic not replayed: %+v", res)
				}
			} else if res.status != 201 || calls.Load() != 2 {
				t.Fatalf("after a panic the key must be free: %+v, calls %d", res, calls.Load())
			}
		})
	}
}

func TestIdempotency_bodyLimit(t *testing.T) {
	_, locks := setup(t)
	var logs logBuffer
	var calls atomic.Int64
	big := strings.Repeat("x", 2000)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, big[:len(b)]) // answers as many bytes as it was sent
	})
	url := serve(t, httpmw.Idempotency(locks, httpmw.WithMaxBody(1024), httpmw.WithLogger(logs.logger()))(h)).URL
	for i := range 2 {
		if r := send(t, "POST", url, "big", big); r.body != big || r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("request %d: got %d bytes, replayed %q", i, len(r.body), r.header.Get("Idempotent-Replayed"))
		}
	}
	if calls.Load() != 2 || !strings.Contains(logs.String(), "response not stored: response larger than the body limit") {
		t.Fatalf("calls %d, log %q", calls.Load(), logs.String())
	}
	send(t, "POST", url, "small", big[:1024])
	if r := send(t, "POST", url, "small", big[:1024]); r.body != big[:1024] || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a body at the limit must be stored: %+v", r)
	}
}

func TestIdempotency_redisDown(t *testing.T) {
	srv := redistest.Start(t)
	locks := locktest.NewClient(t, downClient(t, srv))
	closedURL, closedCalls := ordersAPI(t, locks)
	openURL, openCalls := ordersAPI(t, locks, httpmw.FailOpen())
	srv.Stop(t)
	wantProblem(t, send(t, "POST", closedURL+"/orders", "k", ""), 503, "lock-unavailable")
	if r := send(t, "POST", openURL+"/orders", "k", ""); r.status != 201 {
		t.Fatalf("fail-open: %+v", r)
	}
	if closedCalls.Load() != 0 || openCalls.Load() != 1 {
		t.Fatalf("calls: closed %d open %d", closedCalls.Load(), openCalls.Load())
	}
}

func TestIdempotency_unreadableRecord(t *testing.T) {
	srv, locks := setup(t)
	url, calls := ordersAPI(t, locks)
	send(t, "POST", url+"/orders", "k", "")
	keys := srv.Do(t, "KEYS", "lockkit:idem:*").([]any)
	if len(keys) != 1 {
		t.Fatalf("records: %v", keys)
	}
	srv.Do(t, "SET", keys[0], "\x09future format")
	wantProblem(t, send(t, "POST", url+"/orders", "k", ""), 500, "idempotency-record-unreadable")
	if calls.Load() != 1 {
		t.Fatal("handler ran for an unreadable record")
	}
}

func TestIdempotency_handlerHoldsTheLock(t *testing.T) {
	_, locks := setup(t)
	var fence int64
	var name string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l, ok := core.FromContext(r.Context()); ok {
			fence, name = l.Fence(), l.Name()
		}
	})
	url := serve(t, httpmw.Idempotency(locks)(h)).URL
	if r := send(t, "POST", url, "k", ""); r.status != 200 || fence <= 0 || !strings.HasPrefix(name, "@http-idem/") {
		t.Fatalf("status %d, lock %q fence %d", r.status, name, fence)
	}
	// Nothing written: the replay is the 200 net/http sent.
	if r := send(t, "POST", url, "k", ""); r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay of an empty response: %+v", r)
	}
}

func TestIdempotency_lockLostStoresNothing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locks := locktest.NewClient(t, rdb, core.WithRenewRatio(0.05))
	var calls atomic.Int64
	var logs logBuffer
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			l, _ := core.FromContext(r.Context())
			rdb.Del(context.Background(), l.Key()) // the lock is gone, as after an expiry
			<-r.Context().Done()                   // the watchdog notices and cancels the lock's context
			if !errors.Is(context.Cause(r.Context()), core.ErrLost) {
				http.Error(w, "context not cancelled by the loss", 500)
				return
			}
		}
		w.WriteHeader(http.StatusCreated)
	})
	url := serve(t, httpmw.Idempotency(locks, httpmw.WithTTL(200*time.Millisecond), httpmw.WithLogger(logs.logger()))(h)).URL
	if r := send(t, "POST", url, "k", ""); r.status != 201 {
		t.Fatalf("first: %+v", r)
	}
	if r := send(t, "POST", url, "k", ""); r.header.Get("Idempotent-Replayed") != "" || calls.Load() != 2 {
		t.Fatalf("a holder that lost the lock stored its response: %+v", r)
	}
	if !strings.Contains(logs.String(), "response not stored") {
		t.Fatalf("log: %q", logs.String())
	}
}
