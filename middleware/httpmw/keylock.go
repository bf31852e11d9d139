package httpmw

import (
	"errors"
	"net/http"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/adapter"
)

// KeyFunc returns the key of the lock a request must hold, such as the ID of the resource it
// changes: ByPathValue, ByHeader, ByQuery or your own. The lock is the key in KeyLock's core
// namespace ("http" by default, see WithNamespace): the key of a request, whatever bytes it holds
// ("cron/billing", "@cron/billing", "../x"), can only name a KeyLock lock, never another
// component's. Inside the namespace, locks on the same key serialise whichever route or process
// takes them, so prefix keys that could collide ("order/" + id). An empty key means the request
// needs no lock; an error is answered with 400 (problem "lock-key-invalid") and its message as the
// detail.
type KeyFunc func(r *http.Request) (string, error)

// KeysFunc returns the keys of the locks a request must hold all at once (WithKeys), such as both
// accounts of a transfer. Empty keys are left out and a key given twice counts once; no key means
// the request needs no lock. An error is answered as a KeyFunc's.
type KeysFunc func(r *http.Request) ([]string, error)

// ByPathValue returns a KeyFunc that uses the ServeMux path wildcard name (r.PathValue(name)).
func ByPathValue(name string) KeyFunc {
	return func(r *http.Request) (string, error) { return r.PathValue(name), nil }
}

// ByHeader returns a KeyFunc that uses the first value of a request header.
func ByHeader(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) { return r.Header.Get(name), nil }
}

// ByQuery returns a KeyFunc that uses the first value of a URL query parameter.
func ByQuery(name string) KeyFunc {
	return func(r *http.Request) (string, error) { return r.URL.Query().Get(name), nil }
}

// Keys returns a KeysFunc that gives the key of each of fs, for WithKeys: Keys(ByPathValue("from"),
// ByPathValue("to")) locks both accounts of a transfer. The first error is returned. It panics if
// one of fs is nil.
func Keys(fs ...KeyFunc) KeysFunc { return adapter.Join("httpmw", fs) }

// WithKeys makes KeyLock take the locks of every key f gives, all or nothing (core.AcquireAll), in
// KeyLock's namespace, instead of the lock of one key: KeyLock(locks, nil, WithKeys(f)). A request
// runs once it holds every one of its keys; one whose keys are partly held by other requests
// holds none of them while it waits (up to WithWait), so two requests locking the same keys in
// opposite orders (a transfer from A to B and one from B to A) never deadlock; if the wait ends,
// it gets 409 with Retry-After (problem "resource-locked"). The handler's context is cancelled if
// any of the locks is lost; core.SetFromContext gives every lock (and fence). Up to 100 distinct
// keys, each as a KeyFunc's; one key is taken as KeyLock takes it. Not combinable with WithLimit,
// nor with a KeyFunc argument. KeyLock only.
func WithKeys(f KeysFunc) Option {
	return func(o *options) { o.SetKeys(f) }
}

// PathValue is the former name of ByPathValue.
//
// Deprecated: use ByPathValue.
func PathValue(name string) KeyFunc { return ByPathValue(name) }

// Header is the former name of ByHeader.
//
// Deprecated: use ByHeader.
func Header(name string) KeyFunc { return ByHeader(name) }

// Query is the former name of ByQuery.
//
// Deprecated: use ByQuery.
func Query(name string) KeyFunc { return ByQuery(name) }

// KeyLock returns a middleware that serialises requests sharing a key, across every replica that
// shares the Redis of locks. A request whose KeyFunc gives a key takes the lock on it, waiting
// while another request holds it up to WithWait (default 0: answer at once; never past the
// request's context), then runs the handler with the lock's context (cancelled if the lock is
// lost) and releases the lock, also if the handler panics. A request that cannot take the lock in
// time gets 409 with Retry-After (problem "resource-locked"); Redis down gives 503 unless
// FailOpen, and Redis refusing the lock for a configuration reason 500 (problem
// "lock-misconfigured"). With WithLimit(n), up to n requests of a key run at once (429 when full); with
// WithKeys (and a nil key), a request takes the locks of several keys, all or nothing.
//
// The handler reaches the lock with core.FromContext(r.Context()), e.g. to pass its fencing token
// (Lock.Fence) to the storage it writes. Uncontended, a request costs two round trips to Redis.
// WithReadWrite lets the reads (GET, HEAD, OPTIONS, TRACE) of a key run together.
// KeyLock panics if locks is nil, it has neither a KeyFunc nor WithKeys, or an option is invalid
// or one of Idempotency's.
func KeyLock(locks *core.Client, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	if locks == nil {
		panic(invalidOption("KeyLock needs a *core.Client"))
	}
	o := keyLockOptions(key, opts)
	busy := resourceLocked
	if o.Limit > 0 {
		busy = concurrencyLimit
	}
	var read, write []core.AcquireOption // (len == cap: Acquire never writes into them)
	if o.readWrite {
		read, write = []core.AcquireOption{core.Read()}, []core.AcquireOption{core.Write()}
	}
	return func(next http.Handler) http.Handler {
		return &keyLock{locks: locks, next: next, o: o, busy: busy, read: read, write: write}
	}
}

type keyLock struct {
	locks *core.Client
	next  http.Handler
	o     *options
	busy  problem // the answer when the lock (or every permit) is taken
	// WithReadWrite: the options of a request with a safe method, and of any other; nil otherwise.
	read, write []core.AcquireOption
}

// mode returns the acquire options of request r: a side of the key's read-write lock with
// WithReadWrite, none otherwise.
func (m *keyLock) mode(r *http.Request) []core.AcquireOption {
	if m.write == nil {
		return nil
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return m.read
	}
	return m.write
}

func (m *keyLock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	keys, err := m.o.KeysOf(r)
	if err != nil {
		lockKeyInvalid.write(w, 0, err.Error())
		return
	}
	if len(keys) == 0 {
		m.next.ServeHTTP(w, r)
		return
	}
	h, err := m.o.Acquire(r.Context(), m.locks, keys, m.mode(r)...)
	if err != nil {
		var na *core.NotAcquiredError
		switch {
		case errors.As(err, &na):
			retryAfter(w, na.RetryAfter)
			m.busy.write(w, 0, "")
		case errors.Is(err, core.ErrInvalid) && len(keys) == 1:
			lockKeyInvalid.write(w, 0, "the lock key must be 1 to 1024 bytes")
		case errors.Is(err, core.ErrInvalid):
			lockKeyInvalid.write(w, 0, "too many lock keys, or one that is not 1 to 1024 bytes")
		case errors.Is(err, core.ErrMisconfigured): // no outage: a configuration to fix, not run unlocked
			m.o.warn(r.Context(), "key lock refused: fix the Redis configuration", err, r)
			lockMisconfigured.write(w, 0, "")
		default:
			m.o.warn(r.Context(), "key lock unavailable", err, r)
			if m.o.failOpen {
				m.next.ServeHTTP(w, r)
				return
			}
			lockUnavailable.write(w, 0, "")
		}
		return
	}
	defer func() {
		if err := h.Release(r.Context(), m.o.TTL); err != nil {
			m.o.warn(r.Context(), "release failed", err, r)
		}
	}()
	m.next.ServeHTTP(w, r.WithContext(h.Context()))
}
