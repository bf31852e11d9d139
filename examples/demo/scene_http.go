package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/lockkit/lockkit/middleware/httpmw"
	"go.opentelemetry.io/otel/trace"
)

// sceneHTTP: two replicas of an orders API (httptest servers in this process, one lock client
// each) whose POST /orders goes through httpmw.Idempotency.
func sceneHTTP(ctx context.Context, s *scene) error {
	const work = 300 * time.Millisecond // how long creating an order takes
	db := &orders{perKey: map[string]int{}, started: make(chan string, 8), work: work}
	var urls [2]string
	var clients [2]*http.Client
	for i := range 2 {
		locks, _, err := s.newLocks()
		if err != nil {
			return err
		}
		idem := httpmw.Idempotency(locks, httpmw.WithRetention(10*time.Minute))
		mux := http.NewServeMux()
		mux.Handle("POST /orders", idem(http.HandlerFunc(db.create)))
		srv := httptest.NewServer(serverSpan(s.tracing.tracer, mux))
		s.onClose(srv.Close)
		urls[i], clients[i] = srv.URL, srv.Client()
	}
	s.logf("2 replicas of an orders API; creating an order takes %v; keys are scoped to the route", work)

	type reply struct {
		status int
		header http.Header
		body   string
		took   time.Duration
		err    error
	}
	post := func(replica int, key, body string) reply {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, urls[replica]+"/orders", bytes.NewBufferString(body))
		if err != nil {
			return reply{err: err}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		start := time.Now()
		resp, err := clients[replica].Do(req)
		if err != nil {
			return reply{err: err}
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return reply{resp.StatusCode, resp.Header, string(bytes.TrimSpace(b)), time.Since(start), err}
	}
	show := func(r reply) {
		if r.err != nil {
			s.logf("   → %v", r.err)
			return
		}
		line := fmt.Sprintf("%d %s in %s", r.status, http.StatusText(r.status), fmtDur(r.took))
		for _, h := range []string{"Idempotent-Replayed", "Retry-After"} {
			if v := r.header.Get(h); v != "" {
				line += "  " + h + ": " + v
			}
		}
		s.logf("   → %s  %s", line, brief(r.body))
	}
	key1, key2 := "order-"+s.runID+"-1", "order-"+s.runID+"-2"
	book, pen := `{"item":"book","quantity":1}`, `{"item":"pen","quantity":5}`

	s.logf("1. POST /orders to replica 1, Idempotency-Key: %s, %s", key1, book)
	first := post(0, key1, book)
	show(first)
	s.check(first.err == nil && first.status == http.StatusCreated && db.count(key1) == 1,
		"the first POST ran the handler: %d %s", first.status, http.StatusText(first.status))

	s.logf("2. the client retries it, this time to replica 2")
	replay := post(1, key1, book)
	show(replay)
	s.check(replay.err == nil && replay.status == first.status && replay.body == first.body &&
		replay.header.Get("Idempotent-Replayed") == "true" && db.count(key1) == 1,
		"the retry is replayed (Idempotent-Replayed: true, same body) without running the handler")

	// A duplicate while the first request is still in flight.
	s.logf("3. POST /orders to replica 1, Idempotency-Key: %s, %s", key2, pen)
	inflight := make(chan reply, 1)
	go func() { inflight <- post(0, key2, pen) }()
	for k := ""; k != key2; { // wait until its handler runs
		select {
		case k = <-db.started:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.logf("4. while 3 runs, a duplicate of it to replica 2")
	dup := post(1, key2, pen)
	show(dup)
	orig := <-inflight
	s.logf("   3 completes:")
	show(orig)
	s.check(dup.status == http.StatusConflict && dup.header.Get("Retry-After") != "" && orig.status == http.StatusCreated,
		"a duplicate in flight gets %d with Retry-After; the first one completes with %d", dup.status, orig.status)

	s.logf("5. Idempotency-Key: %s again, with another body, to replica 2", key1)
	mismatch := post(1, key1, `{"item":"book","quantity":100}`)
	show(mismatch)
	s.check(mismatch.status == http.StatusUnprocessableEntity,
		"reusing a key for a different request gets %d %s", mismatch.status, http.StatusText(mismatch.status))

	got := db.snapshot()
	s.check(len(got) == 2 && got[key1] == 1 && got[key2] == 1,
		"exactly one order created per key, for 5 requests: %d and %d", got[key1], got[key2])
	return nil
}

// orders is the API's storage: the side effect that must happen once per idempotency key.
type orders struct {
	mu      sync.Mutex
	n       int
	perKey  map[string]int
	started chan string
	work    time.Duration
}

func (o *orders) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Item     string `json:"item"`
		Quantity int    `json:"quantity"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, "bad order", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	select {
	case o.started <- key:
	default:
	}
	if !sleep(r.Context(), o.work) { // r.Context() is the lock's context: cancelled if the lock is lost
		http.Error(w, "cancelled", http.StatusServiceUnavailable)
		return
	}
	o.mu.Lock()
	o.n++
	o.perKey[key]++
	id := fmt.Sprintf("ord_%d", o.n)
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orders/"+id)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "item": in.Item, "quantity": in.Quantity})
}

func (o *orders) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.perKey[key]
}

func (o *orders) snapshot() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.perKey)
}

// brief shortens a response body for display: a problem document to its title and type's slug.
func brief(body string) string {
	var p struct {
		Type  string `json:"type"`
		Title string `json:"title"`
	}
	if json.Unmarshal([]byte(body), &p) == nil && p.Title != "" {
		slug := p.Type
		if i := bytes.LastIndexByte([]byte(slug), '#'); i >= 0 {
			slug = slug[i+1:]
		}
		return fmt.Sprintf("problem %s: %q", slug, p.Title)
	}
	if len(body) > 70 {
		return body[:67] + "..."
	}
	return body
}

// serverSpan starts a server span per request, so that the lock spans nest under it.
func serverSpan(tracer trace.Tracer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tracer.Start(r.Context(), r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
