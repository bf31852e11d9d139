package httpmw

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lockkit/lockkit/internal/adapter"
)

// Option configures the middlewares of the package: Idempotency and KeyLock (with WithLimit, a
// per-key concurrency limit). The options of one middleware only say so; given to the other, they
// make the constructor panic, as every invalid option does (an error matching core.ErrInvalid, as
// http.ServeMux panics on an invalid pattern): options are fixed at start-up, and none is ignored
// silently. A []Option can be shared by both middlewares when it holds only options of both.
type Option func(*options)

// IdempotencyOption is the former type of Idempotency's options.
//
// Deprecated: use Option; every option is an Option now.
type IdempotencyOption = Option

// KeyLockOption is the former type of KeyLock's options.
//
// Deprecated: use Option; every option is an Option now.
type KeyLockOption = Option

type options struct {
	adapter.KeyOptions[*http.Request] // TTL, wait, logger, namespace, limit, key(s)

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
	failOpen       bool
	readWrite      bool // WithReadWrite: KeyLock takes the key's read-write lock
}

const (
	defaultTTL            = 10 * time.Second
	defaultRetention      = 24 * time.Hour
	defaultMaxBody        = 1 << 20
	defaultMaxRequestBody = 1 << 20
	// keyNamespace is the default core namespace of KeyLock's locks.
	keyNamespace = "http"
)

// The options of one middleware, refused by the other.
var (
	idempotencyOnly = []string{"WithMethods", "RequireKey", "WithScope", "WithFingerprintHeaders",
		"ConflictOnMismatch", "StoreServerErrors", "WithMaxBody", "WithMaxRequestBody", "WithRetention",
		"WithRecordPrefix"}
	keyLockOnly = []string{"WithNamespace", "WithLimit", "WithKeys", "WithReadWrite"}
)

// newOptions applies opts to the defaults.
func newOptions(opts []Option) *options {
	o := &options{
		KeyOptions:     adapter.KeyOptions[*http.Request]{Options: adapter.New("httpmw", defaultTTL, keyNamespace)},
		methods:        []string{http.MethodPost, http.MethodPatch},
		mismatch:       http.StatusUnprocessableEntity,
		maxBody:        defaultMaxBody,
		maxRequestBody: defaultMaxRequestBody,
		retention:      defaultRetention,
	}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

// idempotencyOptions returns Idempotency's options, panicking on an invalid one.
func idempotencyOptions(opts []Option) *options {
	o := newOptions(opts)
	err := o.Options.Validate("Idempotency", keyLockOnly...)
	switch {
	case err != nil:
	case len(o.methods) == 0:
		err = invalidOption("WithMethods needs at least one method")
	case slices.Contains(o.methods, ""):
		err = invalidOption("WithMethods: a method is empty")
	case o.Has("WithScope") && o.scope == nil:
		err = invalidOption("WithScope(nil)")
	case slices.Contains(o.fpHeaders, ""):
		err = invalidOption("WithFingerprintHeaders: a header name is empty")
	case o.maxBody < 0:
		err = invalidOption("WithMaxBody(%d) is negative", o.maxBody)
	case o.maxRequestBody < 0:
		err = invalidOption("WithMaxRequestBody(%d) is negative", o.maxRequestBody)
	case o.retention < time.Millisecond:
		err = invalidOption("WithRetention(%v) is below 1ms", o.retention)
	case strings.ContainsAny(o.prefix, "{}"):
		err = invalidOption("WithRecordPrefix(%q) must not contain '{' or '}'", o.prefix)
	case o.Has("WithRecordPrefix") && o.prefix == "":
		err = invalidOption(`WithRecordPrefix("") is empty: leave the option out for the default`)
	}
	if err != nil {
		panic(err)
	}
	for i, m := range o.methods {
		o.methods[i] = strings.ToUpper(m)
	}
	return o
}

// keyLockOptions returns KeyLock's options for key (nil with WithKeys), panicking on an invalid
// one.
func keyLockOptions(key KeyFunc, opts []Option) *options {
	o := newOptions(opts)
	if key != nil {
		if o.Has("WithKeys") {
			panic(invalidOption("KeyLock takes a KeyFunc or WithKeys, not both"))
		}
		o.Key = key
	}
	err := o.KeyOptions.Validate("KeyLock", idempotencyOnly...)
	switch {
	case err != nil:
	case o.readWrite && o.Has("WithLimit"):
		err = invalidOption("WithReadWrite and WithLimit cannot be combined: a semaphore has no read side")
	case o.readWrite && o.Has("WithKeys"):
		err = invalidOption("WithReadWrite and WithKeys cannot be combined: a set of locks has no read side")
	}
	if err != nil {
		panic(err)
	}
	return o
}

// invalidOption is the error (and panic value) of a bad argument to a constructor.
func invalidOption(format string, args ...any) error {
	return adapter.Invalid("httpmw", format, args...)
}

// idempotencyOption returns Idempotency's option name, which sets what set sets.
func idempotencyOption(name string, set func(*options)) Option {
	return func(o *options) {
		set(o)
		o.Given(name)
	}
}

// WithMethods sets the methods Idempotency applies to (default POST and PATCH). Requests with other
// methods pass through untouched. Idempotency only.
func WithMethods(methods ...string) Option {
	return idempotencyOption("WithMethods", func(o *options) { o.methods = append([]string(nil), methods...) })
}

// RequireKey makes Idempotency answer 400 (problem "idempotency-key-missing") to a request of one of
// its methods that has no Idempotency-Key header; by default such a request passes through. Build a
// second middleware with it for the routes that require a key. Idempotency only.
func RequireKey() Option {
	return idempotencyOption("RequireKey", func(o *options) { o.required = true })
}

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
// for requests that no caller can tell apart. principal must not be nil. Idempotency only.
func WithScope(principal func(r *http.Request) string) Option {
	return idempotencyOption("WithScope", func(o *options) { o.scope = principal })
}

// WithFingerprintHeaders adds request headers to the fingerprint, which by default covers the
// request URI (path and query) and the body. A retry whose fingerprint differs from the stored one
// is rejected (see ConflictOnMismatch). Idempotency only.
func WithFingerprintHeaders(names ...string) Option {
	return idempotencyOption("WithFingerprintHeaders", func(o *options) {
		for _, n := range names {
			o.fpHeaders = append(o.fpHeaders, http.CanonicalHeaderKey(n))
		}
	})
}

// ConflictOnMismatch answers 409 instead of 422 when a key is reused with a different request
// (problem "idempotency-key-reused"), as some clients expect. Idempotency only.
func ConflictOnMismatch() Option {
	return idempotencyOption("ConflictOnMismatch", func(o *options) { o.mismatch = http.StatusConflict })
}

// StoreServerErrors stores 500, 501, 505 and other definite 5xx responses, and a 500 problem for a
// handler that panicked, like any other response (Stripe's policy): retries replay the failure.
// By default they are not stored and the key is released, so that the client can retry. Answers
// that ask for a retry (408, 409, 425, 429, 502, 503, 504) are never stored. Idempotency only.
func StoreServerErrors() Option {
	return idempotencyOption("StoreServerErrors", func(o *options) { o.storeErrors = true })
}

// WithMaxBody sets the largest response body Idempotency stores (default 1 MiB). A larger response
// is still sent in full but not stored: the key is released (a retry runs the handler again) and a
// warning is logged. Idempotency only.
func WithMaxBody(n int) Option {
	return idempotencyOption("WithMaxBody", func(o *options) { o.maxBody = n })
}

// WithMaxRequestBody sets the largest request body Idempotency reads (default 1 MiB): the body is
// hashed into the request's fingerprint, also the part the handler does not read, so the
// middleware bounds it itself. A request whose Content-Length is larger gets 413 (problem
// "request-body-too-large") before the handler runs; a body that turns out larger gives the
// handler an *http.MaxBytesError on reading it, and its response is not stored. Idempotency only.
func WithMaxRequestBody(n int64) Option {
	return idempotencyOption("WithMaxRequestBody", func(o *options) { o.maxRequestBody = n })
}

// WithRetention sets how long a stored response is kept for replays (default 24h). Idempotency
// only.
func WithRetention(d time.Duration) Option {
	return idempotencyOption("WithRetention", func(o *options) { o.retention = d })
}

// WithRecordPrefix sets the prefix of the Redis keys of stored responses (default: the core
// Client's prefix and "idem:", so "lockkit:idem:"). It must not be empty nor contain '{' or '}'.
// Idempotency only.
func WithRecordPrefix(p string) Option {
	return idempotencyOption("WithRecordPrefix", func(o *options) { o.prefix = p })
}

// WithNamespace sets the core namespace of KeyLock's locks (default "http": the lock of key K is
// "@http/K", see core.InNamespace). Request input can never leave the namespace; give two
// components the same namespace only to make them exclude each other on purpose (a gRPC method
// with grpcmw.WithNamespace, a job). 1 to 64 of a-z, 0-9 and '-'. KeyLock only.
func WithNamespace(ns string) Option { return func(o *options) { o.SetNamespace(ns) } }

// WithWait sets how long a request waits for a key another request holds (default 0: answer at
// once, the default of every lockkit adapter). Idempotency: a duplicate of a request in flight
// waits up to d for it to finish and then replays its response (or runs the handler if the first
// one's response was not stored); without a wait it gets 409. KeyLock: a request waits up to d for
// the key's lock (or permit, or every key of WithKeys); without a wait it gets 409 (429 with
// WithLimit). Both answer with Retry-After, the holder's remaining TTL. The wait never outlasts the
// request's context. Both middlewares.
func WithWait(d time.Duration) Option { return func(o *options) { o.SetWait(d) } }

// WithTTL sets the TTL of the lock held while the handler runs (default 10s, between core.MinTTL
// and core.MaxTTL). The lock is renewed by the core watchdog while the handler runs, so the TTL
// only bounds how long a crashed replica keeps the key; it is also the Retry-After hint of a 409.
// Both middlewares.
func WithTTL(d time.Duration) Option { return func(o *options) { o.SetTTL(d) } }

// WithLockTTL is the former name of WithTTL.
//
// Deprecated: use WithTTL.
func WithLockTTL(d time.Duration) Option { return WithTTL(d) }

// FailOpen runs the handler without a lock (and, for Idempotency, without storing its response)
// when Redis is unavailable. By default the middlewares fail closed with 503 (problem
// "lock-unavailable"). Both middlewares. A configuration error (core.ErrMisconfigured: wrong
// credentials, a missing ACL grant, a disabled command) is no outage: it is answered with 500
// (problem "lock-misconfigured") and logged, with or without FailOpen.
func FailOpen() Option {
	return func(o *options) {
		o.failOpen = true
		o.Given("FailOpen")
	}
}

// WithLogger sets where the middlewares log what they cannot tell the client: a response not
// stored (too large, streamed past the limit, lock lost), a failed release, Redis unavailable.
// Default (and nil): slog.Default(), read when a message is logged; slog.New(slog.DiscardHandler)
// silences them. Both middlewares.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.SetLogger(l) } }

// WithLimit makes KeyLock a per-key concurrency limit: up to n requests sharing a key run at once
// (1 to core.MaxPermits), across every replica that shares the Redis of locks, each holding one
// of the key's n permits of a core semaphore (core.Permits) instead of the key's lock. A request
// that finds all n taken waits up to WithWait (default 0), then gets 429 with Retry-After (problem
// "concurrency-limit"). One name, one lock: the permits of key K exclude a KeyLock of K without
// WithLimit (and one with WithReadWrite) while either is held (docs/guarantees.md, "One name, one
// lock"). Replicas should pass the same n (when they differ, a request
// is let in only while fewer than its own n and every running request's n are running, see
// core.Permits). core.FromContext(r.Context()) gives the permit (Fence, Limit). A permit of a
// crashed replica frees itself after WithTTL. Not combinable with WithKeys. KeyLock only.
func WithLimit(n int) Option { return func(o *options) { o.SetLimit(n) } }

// WithReadWrite makes KeyLock take the key's read-write lock (core.Read, core.Write) instead of its
// lock: a request with a safe method (GET, HEAD, OPTIONS, TRACE) takes the shared (read) side and
// runs together with the other reads of the key; any other request takes the exclusive (write)
// side and runs alone. Readers and writers are served in arrival order, across replicas, so a
// stream of reads does not starve a write. One name, one lock: a write and a KeyLock of the same
// key without WithReadWrite are the same exclusive side, and reads exclude it (and WithLimit's
// permits) too (docs/guarantees.md, "One name, one lock").
// core.FromContext(r.Context()) gives the hold (Mode, Fence: see core.Read for the rule a fenced
// resource follows). Not combinable with WithLimit or WithKeys. KeyLock only.
func WithReadWrite() Option {
	return func(o *options) {
		o.readWrite = true
		o.Given("WithReadWrite")
	}
}
