package httpmw

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Option configures Idempotency or KeyLock. Each option says which middleware it applies to; the
// other middleware ignores it. The constructors panic on an invalid option, as http.ServeMux does on
// an invalid pattern: options are fixed at start-up.
type Option func(*options)

type options struct {
	methods     []string
	required    bool
	scope       func(*http.Request) string
	fpHeaders   []string
	mismatch    int
	storeErrors bool
	maxBody     int
	retention   time.Duration
	prefix      string
	wait        time.Duration
	lockTTL     time.Duration
	failOpen    bool
	logger      *slog.Logger
}

const (
	defaultLockTTL   = 10 * time.Second
	defaultRetention = 24 * time.Hour
	defaultMaxBody   = 1 << 20
	defaultLockWait  = 5 * time.Second
)

func defaultOptions(wait time.Duration) options {
	return options{
		methods:   []string{http.MethodPost, http.MethodPatch},
		mismatch:  http.StatusUnprocessableEntity,
		maxBody:   defaultMaxBody,
		retention: defaultRetention,
		wait:      wait,
		lockTTL:   defaultLockTTL,
	}
}

func buildOptions(wait time.Duration, opts []Option) options {
	o := defaultOptions(wait)
	for _, f := range opts {
		f(&o)
	}
	if err := o.validate(); err != nil {
		panic(err)
	}
	for i, m := range o.methods {
		o.methods[i] = strings.ToUpper(m)
	}
	return o
}

func (o *options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("lockkit: httpmw: "+format, args...)
	}
	switch {
	case len(o.methods) == 0:
		return bad("WithMethods needs at least one method")
	case o.maxBody < 0:
		return bad("WithMaxBody(%d) is negative", o.maxBody)
	case o.retention < time.Millisecond:
		return bad("WithRetention(%v) is below 1ms", o.retention)
	case o.lockTTL < 10*time.Millisecond || o.lockTTL > 24*time.Hour:
		return bad("WithLockTTL(%v) is outside [10ms, 24h]", o.lockTTL)
	case o.wait < 0:
		return bad("WithWait(%v) is negative", o.wait)
	case strings.ContainsAny(o.prefix, "{}"):
		return bad("WithRecordPrefix(%q) must not contain '{' or '}'", o.prefix)
	}
	return nil
}

// WithMethods sets the methods Idempotency applies to (default POST and PATCH). Requests with other
// methods pass through untouched. Idempotency only.
func WithMethods(methods ...string) Option {
	return func(o *options) { o.methods = append([]string(nil), methods...) }
}

// RequireKey makes Idempotency answer 400 (problem "idempotency-key-missing") to a request of one of
// its methods that has no Idempotency-Key header; by default such a request passes through. Build a
// second middleware with it for the routes that require a key. Idempotency only.
func RequireKey() Option { return func(o *options) { o.required = true } }

// WithScope sets how Idempotency identifies the caller. A key's record is scoped to the request's
// method, its route (the ServeMux pattern, or the URL path outside a ServeMux route) and the
// caller; by default the caller is the Authorization header (hashed with the key, never stored).
// Applications that authenticate otherwise (cookies, mTLS, an upstream gateway) must return their
// principal here, or callers without an Authorization header share one scope. Idempotency only.
func WithScope(principal func(r *http.Request) string) Option {
	return func(o *options) { o.scope = principal }
}

// WithFingerprintHeaders adds request headers to the fingerprint, which by default covers the
// request URI (path and query) and the body. A retry whose fingerprint differs from the stored one
// is rejected (see ConflictOnMismatch). Idempotency only.
func WithFingerprintHeaders(names ...string) Option {
	return func(o *options) {
		for _, n := range names {
			o.fpHeaders = append(o.fpHeaders, http.CanonicalHeaderKey(n))
		}
	}
}

// ConflictOnMismatch answers 409 instead of 422 when a key is reused with a different request
// (problem "idempotency-key-reused"), as some clients expect. Idempotency only.
func ConflictOnMismatch() Option { return func(o *options) { o.mismatch = http.StatusConflict } }

// StoreServerErrors stores 5xx responses, and a 500 problem for a handler that panicked, like any
// other response (Stripe's policy): retries replay the failure. By default they are not stored and
// the key is released, so that the client can retry. Idempotency only.
func StoreServerErrors() Option { return func(o *options) { o.storeErrors = true } }

// WithMaxBody sets the largest response body Idempotency stores (default 1 MiB). A larger response
// is still sent in full but not stored: the key is released (a retry runs the handler again) and a
// warning is logged. Idempotency only.
func WithMaxBody(n int) Option { return func(o *options) { o.maxBody = n } }

// WithRetention sets how long a stored response is kept for replays (default 24h). Idempotency
// only.
func WithRetention(d time.Duration) Option { return func(o *options) { o.retention = d } }

// WithRecordPrefix sets the prefix of the Redis keys of stored responses (default: the core
// Client's prefix and "idem:", so "lockkit:idem:"). It must not contain '{' or '}'. Idempotency
// only.
func WithRecordPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithWait sets how long a request waits for a lock another request holds. Idempotency: a
// duplicate of a request in flight waits up to d for it to finish and then replays its response
// (or runs the handler if the first one's response was not stored); default 0, answer 409 at once.
// KeyLock: default 5s; 0 answers 409 at once. The wait never outlasts the request's context.
func WithWait(d time.Duration) Option { return func(o *options) { o.wait = d } }

// WithLockTTL sets the TTL of the lock held while the handler runs (default 10s, between 10ms and
// 24h). The lock is renewed by the core watchdog while the handler runs, so the TTL only bounds how
// long a crashed replica keeps the key; it is also the Retry-After hint of a 409. Both middlewares.
func WithLockTTL(d time.Duration) Option { return func(o *options) { o.lockTTL = d } }

// FailOpen runs the handler without a lock (and, for Idempotency, without storing its response)
// when Redis is unavailable. By default the middlewares fail closed with 503 (problem
// "lock-unavailable"). Both middlewares.
func FailOpen() Option { return func(o *options) { o.failOpen = true } }

// WithLogger sets a logger for what the middleware cannot tell the client: a response not stored
// (too large, streamed past the limit), a failed release, Redis unavailable. Default: no logging.
// Both middlewares.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }
