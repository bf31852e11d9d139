package httpmw

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"github.com/lockkit/lockkit/core"
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
// Keys are scoped to the method, the route and the caller (see WithScope), and hashed before they
// reach Redis. Use it inside a ServeMux route (mux.Handle("POST /orders", mw(h))) so that the route
// pattern, not the path, is the scope; wrapped around a whole mux it falls back to the URL path.
//
// Responses with status 5xx, from handlers that panicked, or whose connection was hijacked are not
// stored (unless StoreServerErrors) and the key is released, so that the client can retry; nor are
// bodies over WithMaxBody. Problems are answered as RFC 9457 application/problem+json (see the
// package documentation). Idempotency panics if locks is nil or an option is invalid.
func Idempotency(locks *core.Client, opts ...Option) func(http.Handler) http.Handler {
	if locks == nil {
		panic("lockkit: httpmw: Idempotency needs a *core.Client")
	}
	o := buildOptions(0, opts)
	if o.prefix == "" {
		o.prefix = locks.Prefix() + "idem:"
	}
	bufs := &sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
	return func(next http.Handler) http.Handler {
		return &idempotency{locks: locks, next: next, o: &o, bufs: bufs}
	}
}

type idempotency struct {
	locks *core.Client
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
	guard, name := m.names(r, key)
	var l *core.Lock
	var err error
	if m.o.wait > 0 {
		l, err = m.locks.Acquire(r.Context(), name, m.o.lockTTL, core.WithGuard(guard), core.WithWait(m.o.wait))
	} else {
		l, err = m.locks.TryAcquire(r.Context(), name, m.o.lockTTL, core.WithGuard(guard))
	}
	if err != nil {
		m.refused(w, r, err)
		return
	}
	m.run(w, r, l, guard)
}

// refused answers a request whose key could not be taken: a replay, a duplicate in flight, or
// Redis down.
func (m *idempotency) refused(w http.ResponseWriter, r *http.Request, err error) {
	var g *core.GuardedError
	var na *core.NotAcquiredError
	switch {
	case errors.As(err, &g):
		m.replay(w, r, g.Value)
	case errors.As(err, &na):
		retryAfter(w, na.RetryAfter)
		keyInUse.write(w, 0, "retry after the first request has completed")
	case errors.Is(err, core.ErrUnavailable), errors.Is(err, core.ErrClosed):
		m.o.warn(r.Context(), "lockkit: httpmw: idempotency lock unavailable", err, r)
		if m.o.failOpen {
			m.next.ServeHTTP(w, r)
			return
		}
		lockUnavailable.write(w, 0, "")
	default:
		m.o.warn(r.Context(), "lockkit: httpmw: idempotency lock refused", err, r)
		lockUnavailable.write(w, http.StatusInternalServerError, "")
	}
}

// replay answers with a stored response, if the request matches the one that produced it.
func (m *idempotency) replay(w http.ResponseWriter, r *http.Request, value string) {
	rec, ok := parseRecord(value)
	if !ok {
		m.o.warn(r.Context(), "lockkit: httpmw: stored response unreadable", nil, r)
		recordBroken.write(w, 0, "")
		return
	}
	body := &hashBody{rc: bodyOf(r), h: m.fingerprint(r)}
	buf := m.bufs.Get().(*[]byte)
	fp, err := body.sum(*buf)
	m.bufs.Put(buf)
	if err != nil {
		keyMalformed.write(w, http.StatusBadRequest, "the request body could not be read")
		return
	}
	if string(fp[:]) != rec.fp {
		keyReused.write(w, m.o.mismatch, "this Idempotency-Key was used with a different request (URI, body or headers)")
		return
	}
	h := w.Header()
	rec.setHeaders(h)
	h["Idempotent-Replayed"] = []string{"true"}
	w.WriteHeader(rec.status)
	_, _ = io.WriteString(w, rec.body)
}

// run calls the handler under the lock and stores its response with the release.
func (m *idempotency) run(w http.ResponseWriter, r *http.Request, l *core.Lock, guard string) {
	rw := &recorder{w: w, limit: m.o.maxBody}
	body := &hashBody{rc: bodyOf(r), h: m.fingerprint(r)}
	r2 := r.WithContext(l.Context())
	r2.Body = body
	returned := false
	defer func() {
		if !returned { // the handler panicked (or called runtime.Goexit): the panic goes on
			if m.o.storeErrors {
				m.store(r, l, guard, rw, body, true)
			} else {
				m.release(r, l, "handler panicked")
			}
		}
	}()
	m.next.ServeHTTP(rw, r2)
	returned = true
	switch {
	case rw.hijacked:
		m.release(r, l, "")
	case rw.overflow:
		m.release(r, l, "response larger than the body limit")
	case rw.status >= 500 && !m.o.storeErrors:
		m.release(r, l, "")
	default:
		m.store(r, l, guard, rw, body, false)
	}
}

// store saves the recorded response (a 500 problem if the handler panicked) and releases the lock,
// in one round trip.
func (m *idempotency) store(r *http.Request, l *core.Lock, guard string, rw *recorder, body *hashBody, panicked bool) {
	if panicked {
		h := http.Header{"Content-Type": {"application/problem+json"}}
		rw.buf = append(appendRecordHead(rw.buf[:0], handlerPanicked.status, h), handlerPanicked.body(0, "")...)
	} else if rw.status == 0 { // nothing written: net/http answers 200 with the headers as they are
		rw.start(http.StatusOK)
	}
	buf := m.bufs.Get().(*[]byte)
	fp, err := body.sum(*buf)
	m.bufs.Put(buf)
	if err != nil {
		m.release(r, l, "request body unreadable: "+err.Error())
		return
	}
	copy(rw.buf[1:], fp[:])
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.o.lockTTL)
	defer cancel()
	if err := l.ReleaseSet(ctx, guard, rw.buf, m.o.retention); err != nil {
		m.o.warn(ctx, "lockkit: httpmw: response not stored", err, r)
	}
}

// release gives up the key without storing anything, logging why if why is set.
func (m *idempotency) release(r *http.Request, l *core.Lock, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.o.lockTTL)
	defer cancel()
	err := l.Release(ctx)
	if why != "" {
		m.o.warn(ctx, "lockkit: httpmw: response not stored: "+why, nil, r)
	}
	if err != nil {
		m.o.warn(ctx, "lockkit: httpmw: release failed", err, r)
	}
}

func bodyOf(r *http.Request) io.ReadCloser {
	if r.Body == nil {
		return http.NoBody
	}
	return r.Body
}

// warn logs a problem the client is not told about.
func (o *options) warn(ctx context.Context, msg string, err error, r *http.Request) {
	if o.logger == nil {
		return
	}
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("route", route(r))}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	o.logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// route returns the ServeMux pattern of r, or its path outside a route.
func route(r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	return r.URL.Path
}
