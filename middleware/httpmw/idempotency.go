package httpmw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/exactlyonce"
)

// Idempotency returns a middleware that makes retries of a request carrying an Idempotency-Key
// header take effect once, across every replica that shares the Redis of locks:
//
//   - The first request takes an in-flight lock on the key and runs the handler with the lock's
//     context (cancelled if the lock is lost). Its response is passed through to the client as it is
//     written and, when the handler returns, stored with the lock's release in one round trip.
//   - A retry after that gets the stored status, headers and body with "Idempotent-Replayed: true",
//     in one round trip, without calling the handler, if its fingerprint (request URI, body,
//     WithFingerprintHeaders) matches; otherwise 422 (see ConflictOnMismatch).
//   - A duplicate that arrives while the first is in flight gets 409 with Retry-After, or waits for
//     the first one's response (WithWait).
//
// Keys are scoped to the method, the route and the caller's credentials (Authorization, Cookie,
// client certificate; WithScope adds a principal), and hashed before they reach Redis. Use it
// inside a ServeMux route (mux.Handle("POST /orders", mw(h))) so that the route pattern, not the
// path, is the scope; wrapped around a whole mux it falls back to the URL path.
//
// Only definite answers are stored. Answers that tell the client to try again (408, 409, 425, 429,
// 502, 503, 504) are passed through and the key is released; so are other 5xx and a handler's
// panic unless StoreServerErrors, hijacked connections, bodies over WithMaxBody, and requests
// whose body is over WithMaxRequestBody (answered 413 before the handler runs when Content-Length
// says so). Problems are answered as RFC 9457 application/problem+json (see the package
// documentation). Idempotency panics if locks is nil or an option is invalid or one of KeyLock's.
func Idempotency(locks *core.Client, opts ...Option) func(http.Handler) http.Handler {
	if locks == nil {
		panic(invalidOption("Idempotency needs a *core.Client"))
	}
	o := idempotencyOptions(opts)
	store, err := exactlyonce.New(locks, exactlyonce.Config{
		Component: "httpmw", Namespace: idemNamespace, RecordPrefix: o.prefix,
		TTL: o.TTL, Wait: o.Wait, Retention: o.retention, FailOpen: o.failOpen, Logger: o.Logger,
	})
	if err != nil {
		panic(err)
	}
	bufs := &sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
	return func(next http.Handler) http.Handler {
		return &idempotency{store: store, next: next, o: o, bufs: bufs}
	}
}

// errBody marks an error reading the request body for its fingerprint.
var errBody = errors.New("lockkit: httpmw: request body unreadable")

type idempotency struct {
	store *exactlyonce.Store
	next  http.Handler
	o     *options
	bufs  *sync.Pool // *[]byte copy buffers for hashing request bodies
}

func (m *idempotency) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !slices.Contains(m.o.methods, r.Method) {
		m.next.ServeHTTP(w, r)
		return
	}
	vals := r.Header[keyHeader]
	if len(vals) == 0 {
		if m.o.required {
			keyMissing.write(w, 0, "")
			return
		}
		m.next.ServeHTTP(w, r)
		return
	}
	key, ok := "", false
	if len(vals) == 1 {
		key, ok = parseKey(vals[0])
	}
	if !ok {
		keyMalformed.write(w, 0, `send one Idempotency-Key: a string ("abc") of 1 to 255 printable ASCII characters`)
		return
	}
	if r.ContentLength > m.o.maxRequestBody {
		bodyTooLarge.write(w, 0, "")
		return
	}
	body := &hashBody{rc: bodyOf(r), h: m.fingerprint(r), limit: m.o.maxRequestBody}
	req := &exactlyonce.Request{
		Key: m.scope(r, key),
		Fingerprint: func() ([32]byte, error) {
			fp, err := m.sum(body)
			if err != nil {
				err = fmt.Errorf("%w: %w", errBody, err)
			}
			return fp, err
		},
		Log: []slog.Attr{slog.String("method", r.Method), slog.String("route", route(r))},
	}
	run, rec, err := m.store.Begin(r.Context(), req)
	switch {
	case run != nil:
		m.run(w, r, run, body)
	case rec != nil:
		m.replay(w, r, rec)
	default:
		m.refused(w, r, err)
	}
}

// refused answers a request whose key could not be taken: a duplicate in flight, a reused key, a
// body that could not be read, or Redis down (logged by the store).
func (m *idempotency) refused(w http.ResponseWriter, r *http.Request, err error) {
	var inFlight *exactlyonce.InFlightError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &inFlight):
		retryAfter(w, inFlight.RetryAfter)
		keyInUse.write(w, 0, "retry after the first request has completed")
	case errors.Is(err, exactlyonce.ErrMismatch):
		keyReused.write(w, m.o.mismatch, "this Idempotency-Key was used with a different request (URI, body or headers)")
	case errors.Is(err, exactlyonce.ErrUnreadable):
		recordBroken.write(w, 0, "")
	case errors.As(err, &tooLarge):
		bodyTooLarge.write(w, 0, "")
	case errors.Is(err, core.ErrUnavailable), errors.Is(err, core.ErrClosed):
		lockUnavailable.write(w, 0, "")
	case errors.Is(err, core.ErrMisconfigured):
		m.o.warn(r.Context(), "idempotency lock refused: fix the Redis configuration", err, r)
		lockMisconfigured.write(w, 0, "")
	case errors.Is(err, errBody):
		keyMalformed.write(w, http.StatusBadRequest, "the request body could not be read")
	default:
		m.o.warn(r.Context(), "idempotency lock refused", err, r)
		lockUnavailable.write(w, http.StatusInternalServerError, "")
	}
}

// replay answers with a stored response; the store checked the request's fingerprint.
func (m *idempotency) replay(w http.ResponseWriter, r *http.Request, stored *exactlyonce.Record) {
	rec, ok := parseRecord(stored)
	if !ok {
		m.o.warn(r.Context(), "stored response unreadable", nil, r)
		recordBroken.write(w, 0, "")
		return
	}
	h := w.Header()
	rec.setHeaders(h)
	h["Idempotent-Replayed"] = []string{"true"}
	w.WriteHeader(rec.status)
	_, _ = io.WriteString(w, rec.body)
}

// run calls the handler under the lock and stores its response with the release.
func (m *idempotency) run(w http.ResponseWriter, r *http.Request, run *exactlyonce.Run, body *hashBody) {
	rw := &recorder{w: w, limit: m.o.maxBody}
	r2 := r.WithContext(run.Context())
	r2.Body = body
	ctx := r.Context()
	returned := false
	defer func() {
		if !returned { // the handler panicked (or called runtime.Goexit): the panic goes on
			if m.o.storeErrors {
				m.save(ctx, run, rw, body, true)
			} else {
				_ = run.Release(ctx, "handler panicked")
			}
		}
	}()
	m.next.ServeHTTP(rw, r2)
	returned = true
	switch {
	case rw.hijacked:
		_ = run.Release(ctx, "")
	case rw.overflow:
		_ = run.Release(ctx, "response larger than the body limit")
	case retryable(rw.status, m.o.storeErrors):
		_ = run.Release(ctx, "")
	default:
		m.save(ctx, run, rw, body, false)
	}
}

// retryable reports whether a response tells the client to try again, so that it is not stored:
// 408, 409, 425 and 429 always, 502, 503 and 504 always, other 5xx unless storeErrors. A status
// of 0 is a handler that wrote nothing: net/http answers 200.
func retryable(status int, storeErrors bool) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return status >= 500 && !storeErrors
}

// save stores the recorded response (a 500 problem if the handler panicked) and releases the lock,
// in one round trip.
func (m *idempotency) save(ctx context.Context, run *exactlyonce.Run, rw *recorder, body *hashBody, panicked bool) {
	if panicked {
		h := http.Header{"Content-Type": {"application/problem+json"}}
		rw.buf = append(appendRecordHead(rw.buf[:0], handlerPanicked.status, h), handlerPanicked.body(0, "")...)
	} else if rw.status == 0 { // nothing written: net/http answers 200 with the headers as they are
		rw.start(http.StatusOK)
	}
	fp, err := m.sum(body)
	if err != nil {
		_ = run.Release(ctx, "request body unreadable or over the limit: "+err.Error())
		return
	}
	exactlyonce.SetFingerprint(rw.buf, fp)
	_ = run.Store(ctx, rw.buf, 0)
}

// sum completes the request's fingerprint.
func (m *idempotency) sum(body *hashBody) ([32]byte, error) {
	buf := m.bufs.Get().(*[]byte)
	defer m.bufs.Put(buf)
	return body.sum(*buf)
}

func bodyOf(r *http.Request) io.ReadCloser {
	if r.Body == nil {
		return http.NoBody
	}
	return r.Body
}

// warn logs a problem the client is not told about, with the request's method and route.
func (o *options) warn(ctx context.Context, msg string, err error, r *http.Request) {
	o.Warn(ctx, msg, err, slog.String("method", r.Method), slog.String("route", route(r)))
}

// route returns the ServeMux pattern of r, or its path outside a route.
func route(r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	return r.URL.Path
}
