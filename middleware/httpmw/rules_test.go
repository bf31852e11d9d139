package httpmw_test

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lockkit/lockkit/middleware/httpmw"
)

// Callers told apart only by their session cookie never share a record: mallory, sending alice's
// key and body, gets an order of her own, not alice's.
func TestIdempotency_cookieCallersDoNotShareRecords(t *testing.T) {
	_, locks := setup(t)
	url, calls := ordersAPI(t, locks)
	alice := send(t, "POST", url+"/orders", "order-1", "pizza", "Cookie", "session=alice")
	mallory := send(t, "POST", url+"/orders", "order-1", "pizza", "Cookie", "session=mallory")
	if alice.status != 201 || mallory.status != 201 || calls.Load() != 2 {
		t.Fatalf("calls %d: alice %+v, mallory %+v", calls.Load(), alice, mallory)
	}
	if mallory.header.Get("Idempotent-Replayed") != "" || mallory.body == alice.body {
		t.Fatalf("mallory got alice's stored order: %+v", mallory)
	}
	// Alice's own retry still replays.
	if r := send(t, "POST", url+"/orders", "order-1", "pizza", "Cookie", "session=alice"); r.body != alice.body ||
		r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("alice's retry: %+v", r)
	}
}

// Answers that tell the client to retry are passed through and not stored, even with
// StoreServerErrors; definite failures are stored with it.
func TestIdempotency_retryAnswersNotStored(t *testing.T) {
	_, locks := setup(t)
	for _, status := range []int{408, 409, 425, 429, 502, 503, 504, 500} {
		var calls atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				w.WriteHeader(status)
				return
			}
			w.WriteHeader(http.StatusCreated)
		})
		url := serve(t, httpmw.Idempotency(locks, httpmw.StoreServerErrors())(h)).URL
		key := "k" + strconv.Itoa(status)
		first := send(t, "POST", url, key, "")
		retry := send(t, "POST", url, key, "")
		if first.status != status {
			t.Fatalf("%d: first answered %d", status, first.status)
		}
		if status == 500 { // a definite failure: stored with StoreServerErrors
			if retry.status != 500 || retry.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("500 with StoreServerErrors: retry %+v", retry)
			}
			continue
		}
		if retry.status != 201 || retry.header.Get("Idempotent-Replayed") != "" || calls.Load() != 2 {
			t.Fatalf("%d was stored: retry %+v, calls %d", status, retry, calls.Load())
		}
	}
}

// The middleware bounds the request body it hashes: a declared length over the limit is refused
// before the handler runs, a streamed one fails the handler's read and is not stored, and a retry
// over the limit is refused too.
func TestIdempotency_requestBodyLimit(t *testing.T) {
	_, locks := setup(t)
	var calls atomic.Int64
	var readErr atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if _, err := io.ReadAll(r.Body); err != nil {
			readErr.Store(err)
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	url := serve(t, httpmw.Idempotency(locks, httpmw.WithMaxRequestBody(100))(h)).URL
	wantProblem(t, send(t, "POST", url, "big", strings.Repeat("x", 101)), 413, "request-body-too-large")
	if calls.Load() != 0 {
		t.Fatal("the handler ran for a body over the limit")
	}
	// A body without Content-Length: the handler's read fails at the limit.
	chunked := func(key string, n int) response {
		req, _ := http.NewRequest("POST", url, io.MultiReader(strings.NewReader(strings.Repeat("y", n))))
		req.ContentLength = -1
		req.Header.Set("Idempotency-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return response{status: res.StatusCode, header: res.Header, body: string(b)}
	}
	if r := chunked("stream", 5000); r.status != 413 || calls.Load() != 1 {
		t.Fatalf("streamed body over the limit: %+v, calls %d", r, calls.Load())
	}
	var mbe *http.MaxBytesError
	if err, _ := readErr.Load().(error); !errors.As(err, &mbe) || mbe.Limit != 100 {
		t.Fatalf("handler's read error %v, want *http.MaxBytesError", err)
	}
	if r := chunked("stream", 5000); r.status != 413 || r.header.Get("Idempotent-Replayed") != "" || calls.Load() != 2 {
		t.Fatalf("a response to a body over the limit was stored: %+v", r)
	}
	// At the limit, stored and replayed; a retry with a longer streamed body is refused.
	if r := chunked("exact", 100); r.status != 201 {
		t.Fatalf("body at the limit: %+v", r)
	}
	if r := chunked("exact", 100); r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("body at the limit not replayed: %+v", r)
	}
	wantProblem(t, chunked("exact", 5000), 413, "request-body-too-large")
}
