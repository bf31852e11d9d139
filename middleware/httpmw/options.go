package httpmw

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/lockkit/lockkit/internal/adapter"
)

// Option configures both middlewares: WithTTL, WithWait, FailOpen and WithLogger. The
// constructors panic on an invalid option (an error matching core.ErrInvalid), as http.ServeMux
// does on an invalid pattern: options are fixed at start-up.
type Option interface {
	IdempotencyOption
	KeyLockOption
}

// IdempotencyOption configures Idempotency. Every Option is one too.
type IdempotencyOption interface{ applyIdempotency(*options) }

// KeyLockOption configures KeyLock. Every Option is one too.
type KeyLockOption interface{ applyKeyLock(*options) }

// bothOption, idemOption and keyOption are the options of both middlewares, of Idempotency and of
// KeyLock.
type (
	bothOption func(*options)
	idemOption func(*options)
	keyOption  func(*options)
)

func (f bothOption) applyIdempotency(o *options) { f(o) }
func (f bothOption) applyKeyLock(o *options)     { f(o) }
func (f idemOption) applyIdempotency(o *options) { f(o) }
func (f keyOption) applyKeyLock(o *options)      { f(o) }

type options struct {
	methods        []string
	required       bool
	scope          func(*http.Request) string
	fpHeaders      []string
	mismatch       int
	storeErrors    bool
	maxBody        int
	maxRequestBody int64
	retention      time.Duration
	prefix         string
	namespace      string
	wait           time.Duration
	ttl            time.Duration
	failOpen       bool
	logger         *slog.Logger
	readWrite      bool // WithReadWrite: KeyLock takes the key's read-write lock
}

const (
	defaultTTL            = 10 * time.Second
	defaultRetention      = 24 * time.Hour
	defaultMaxBody        = 1 << 20
	defaultMaxRequestBody = 1 << 20
	defaultLockWait       = 5 * time.Second
	// keyNamespace is the default core namespace of KeyLock's locks.
	keyNamespace = "http"
)

func defaultOptions(wait time.Duration) options {
	return options{
		methods:        []string{http.MethodPost, http.MethodPatch},
		mismatch:       http.StatusUnprocessableEntity,
		maxBody:        defaultMaxBody,
		maxRequestBody: defaultMaxRequestBody,
		retention:      defaultRetention,
		namespace:      keyNamespace,
		wait:           wait,
		ttl:            defaultTTL,
	}
}

func idempotencyOptions(opts []IdempotencyOption) options {
	o := defaultOptions(0)
	for _, f := range opts {
		f.applyIdempotency(&o)
	}
	return o.checked()
}

func keyLockOptions(opts []KeyLockOption) options {
	o := defaultOptions(defaultLockWait)
	for _, f := range opts {
		f.applyKeyLock(&o)
	}
	return o.checked()
}

// checked validates o, panicking on an invalid option, and normalises it.
func (o options) checked() options {
	if err := o.validate(); err != nil {
		panic(err)
	}
	for i, m := range o.methods {
		o.methods[i] = strings.ToUpper(m)
	}
	return o
}

// invalidOption is the error (and panic value) of a bad argument to a constructor.
func invalidOption(format string, args ...any) error {
	return adapter.Invalid("httpmw", format, args...)
}

func (o *options) validate() error {
	switch {
	case len(o.methods) == 0:
		return invalidOption("WithMethods needs at least one method")
	case o.maxBody < 0:
		return invalidOption("WithMaxBody(%d) is negative", o.maxBody)
	case o.maxRequestBody < 0:
		return invalidOption("WithMaxRequestBody(%d) is negative", o.maxRequestBody)
	case o.retention < time.Millisecond:
		return invalidOption("WithRetention(%v) is below 1ms", o.retention)
	case strings.ContainsAny(o.prefix, "{}"):
		return invalidOption("WithRecordPrefix(%q) must not contain '{' or '}'", o.prefix)
	}
	if err := adapter.CheckTTL("httpmw", "WithTTL", o.ttl); err != nil {
		return err
	}
	if err := adapter.CheckWait("httpmw", o.wait); err != nil {
		return err
	}
	return adapter.CheckNamespace("httpmw", o.namespace)
}

// WithMethods sets the methods Idempotency applies to (default POST and PATCH). Requests with other
// methods pass through untouched. Idempotency only.
func WithMethods(methods ...string) IdempotencyOption {
	return idemOption(func(o *options) { o.methods = append([]string(nil), methods...) })
}

// RequireKey makes Idempotency answer 400 (problem "idempotency-key-missing") to a request of one of
// its methods that has no Idempotency-Key header; by default such a request passes through. Build a
// second middleware with it for the routes that require a key. Idempotency only.
func RequireKey() IdempotencyOption { return idemOption(func(o *options) { o.required = true }) }

// WithScope scopes Idempotency's keys by the caller's principal instead of the credentials the
// request carries. A key's record is always scoped to the request's method and its route (the
// ServeMux pattern, or the URL path outside a ServeMux route), and to the caller: by default the
// credentials the transport carries, every Authorization and Cookie header value and the client
// certificate (all hashed with the key, never stored), so that no default lets a response cross
// callers. principal adds to method and route; it never widens them.
//
// Return a stable principal ID that your authentication resolved (a user or tenant ID, e.g. from
// the request's context), never a raw credential. A raw bearer token or session cookie changes
// when the client refreshes it: a retry sent after a refresh lands in another scope and runs the
// handler again, which is what the default does. A principal ID keeps one scope across refreshes.
// An empty principal is a scope of its own, shared by every caller that gets it: return one only
// for requests that no caller can tell apart. Idempotency only.
func WithScope(principal func(r *http.Request) string) IdempotencyOption {
	return idemOption(func(o *options) { o.scope = principal })
}

// WithFingerprintHeaders adds request headers to the fingerprint, which by default covers the
// request URI (path and query) and the body. A retry whose fingerprint differs from the stored one
// is rejected (see ConflictOnMismatch). Idempotency only.
func WithFingerprintHeaders(names ...string) IdempotencyOption {
	return idemOption(func(o *options) {
		for _, n := range names {
			o.fpHeaders = append(o.fpHeaders, http.CanonicalHeaderKey(n))
		}
	})
}

// ConflictOnMismatch answers 409 instead of 422 when a key is reused with a different request
// (problem "idempotency-key-reused"), as some clients expect. Idempotency only.
func ConflictOnMismatch() IdempotencyOption {
	return idemOption(func(o *options) { o.mismatch = http.StatusConflict })
}

// StoreServerErrors stores 500, 501, 505 and other definite 5xx responses, and a 500 problem for a
// handler that panicked, like any other response (Stripe's policy): retries replay the failure.
// By default they are not stored and the key is released, so that the client can retry. Answers
// that ask for a retry (408, 409, 425, 429, 502, 503, 504) are never stored. Idempotency only.
func StoreServerErrors() IdempotencyOption {
	return idemOption(func(o *options) { o.storeErrors = true })
}

// WithMaxBody sets the largest response body Idempotency stores (default 1 MiB). A larger response
// is still sent in full but not stored: the key is released (a retry runs the handler again) and a
// warning is logged. Idempotency only.
func WithMaxBody(n int) IdempotencyOption { return idemOption(func(o *options) { o.maxBody = n }) }

// WithMaxRequestBody sets the largest request body Idempotency reads (default 1 MiB): the body is
// hashed into the request's fingerprint, also the part the handler does not read, so the
// middleware bounds it itself. A request whose Content-Length is larger gets 413 (problem
// "request-body-too-large") before the handler runs; a body that turns out larger gives the
// handler an *http.MaxBytesError on reading it, and its response is not stored. Idempotency only.
func WithMaxRequestBody(n int64) IdempotencyOption {
	return idemOption(func(o *options) { o.maxRequestBody = n })
}

// WithRetention sets how long a stored response is kept for replays (default 24h). Idempotency
// only.
func WithRetention(d time.Duration) IdempotencyOption {
	return idemOption(func(o *options) { o.retention = d })
}

// WithRecordPrefix sets the prefix of the Redis keys of stored responses (default: the core
// Client's prefix and "idem:", so "lockkit:idem:"). It must not contain '{' or '}'. Idempotency
// only.
func WithRecordPrefix(p string) IdempotencyOption {
	return idemOption(func(o *options) { o.prefix = p })
}

// WithNamespace sets the core namespace of KeyLock's locks (default "http": the lock of key K is
// "@http/K", see core.InNamespace). Request input can never leave the namespace; give two
// components the same namespace only to make them exclude each other on purpose (a gRPC method
// with grpcmw.WithNamespace, a job). 1 to 64 of a-z, 0-9 and '-'. KeyLock only.
func WithNamespace(ns string) KeyLockOption { return keyOption(func(o *options) { o.namespace = ns }) }

// WithWait sets how long a request waits for a lock another request holds. Idempotency: a
// duplicate of a request in flight waits up to d for it to finish and then replays its response
// (or runs the handler if the first one's response was not stored); default 0, answer 409 at once.
// KeyLock: default 5s; 0 answers 409 at once. The wait never outlasts the request's context.
func WithWait(d time.Duration) Option { return bothOption(func(o *options) { o.wait = d }) }

// WithTTL sets the TTL of the lock held while the handler runs (default 10s, between core.MinTTL
// and core.MaxTTL). The lock is renewed by the core watchdog while the handler runs, so the TTL
// only bounds how long a crashed replica keeps the key; it is also the Retry-After hint of a 409.
// Both middlewares.
func WithTTL(d time.Duration) Option { return bothOption(func(o *options) { o.ttl = d }) }

// WithLockTTL is the former name of WithTTL.
//
// Deprecated: use WithTTL.
func WithLockTTL(d time.Duration) Option { return WithTTL(d) }

// FailOpen runs the handler without a lock (and, for Idempotency, without storing its response)
// when Redis is unavailable. By default the middlewares fail closed with 503 (problem
// "lock-unavailable"). Both middlewares.
func FailOpen() Option { return bothOption(func(o *options) { o.failOpen = true }) }

// WithReadWrite makes KeyLock take the key's read-write lock (core.Read, core.Write) instead of its
// lock: a request with a safe method (GET, HEAD, OPTIONS, TRACE) takes the shared (read) side and
// runs together with the other reads of the key; any other request takes the exclusive (write)
// side and runs alone. Readers and writers are served in arrival order, across replicas, so a
// stream of reads does not starve a write. The key's read-write lock is apart from its lock: every
// KeyLock (and grpcmw interceptor sharing the namespace) that locks the same keys must use it.
// core.FromContext(r.Context()) gives the hold (Mode, Fence: see core.Read for the rule a fenced
// resource follows). KeyLock only (Limit refuses it).
func WithReadWrite() KeyLockOption { return keyOption(func(o *options) { o.readWrite = true }) }

// WithLogger sets a logger for what the middleware cannot tell the client: a response not stored
// (too large, streamed past the limit, lock lost), a failed release, Redis unavailable. Default:
// no logging. Both middlewares.
func WithLogger(l *slog.Logger) Option { return bothOption(func(o *options) { o.logger = l }) }
