package httpmw

import (
	"context"
	"errors"
	"net/http"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/adapter"
)

// KeyFunc returns the key of the lock a request must hold, such as the ID of the resource it
// changes. The lock is the key in KeyLock's core namespace ("http" by default, see WithNamespace):
// the key of a request, whatever bytes it holds ("cron/billing", "@cron/billing", "../x"), can
// only name a KeyLock lock, never another component's. Inside the namespace, locks on the same
// key serialise whichever route or process takes them, so prefix keys that could collide
// ("order/" + id). An empty key means the request needs no lock; an error is answered with 400
// (problem "lock-key-invalid") and its message as the detail.
type KeyFunc func(r *http.Request) (string, error)

// PathValue returns a KeyFunc that uses the ServeMux path wildcard name (r.PathValue(name)).
func PathValue(name string) KeyFunc {
	return func(r *http.Request) (string, error) { return r.PathValue(name), nil }
}

// Header returns a KeyFunc that uses the first value of a request header.
func Header(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) { return r.Header.Get(name), nil }
}

// Query returns a KeyFunc that uses the first value of a URL query parameter.
func Query(name string) KeyFunc {
	return func(r *http.Request) (string, error) { return r.URL.Query().Get(name), nil }
}

// KeyLock returns a middleware that serialises requests sharing a key, across every replica that
// shares the Redis of locks. A request whose KeyFunc gives a key takes the lock on it, waiting while
// another request holds it up to WithWait (default 5s, never past the request's context; 0 answers
// at once), then runs the handler with the lock's context (cancelled if the lock is lost) and
// releases the lock, also if the handler panics. A request that cannot take the lock in time gets
// 409 with Retry-After (problem "resource-locked"); Redis down gives 503 unless FailOpen.
//
// The handler reaches the lock with core.FromContext(r.Context()), e.g. to pass its fencing token
// (Lock.Fence) to the storage it writes. Uncontended, a request costs two round trips to Redis.
// WithReadWrite lets the reads (GET, HEAD, ...) of a key run together.
// KeyLock panics if locks or key is nil or an option is invalid.
func KeyLock(locks *core.Client, key KeyFunc, opts ...KeyLockOption) func(http.Handler) http.Handler {
	if locks == nil || key == nil {
		panic(invalidOption("KeyLock needs a *core.Client and a KeyFunc"))
	}
	o := keyLockOptions(opts)
	var read, write []core.AcquireOption // (len == cap: Acquire's appends never share them)
	if o.readWrite {
		read, write = []core.AcquireOption{core.Read()}, []core.AcquireOption{core.Write()}
	}
	return func(next http.Handler) http.Handler {
		return &keyLock{locks: locks, key: key, next: next, o: &o, busy: resourceLocked, read: read, write: write}
	}
}

type keyLock struct {
	locks *core.Client
	key   KeyFunc
	next  http.Handler
	o     *options
	extra []core.AcquireOption // Limit: core.Permits(n)
	busy  problem              // the answer when the lock (or every permit) is taken
	// WithReadWrite: the options of a request with a safe method, and of any other; nil otherwise.
	read, write []core.AcquireOption
}

// opts returns the acquire options of request r.
func (m *keyLock) opts(r *http.Request) []core.AcquireOption {
	if m.write == nil {
		return m.extra
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return m.read
	}
	return m.write
}

func (m *keyLock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k, err := m.key(r)
	if err != nil {
		lockKeyInvalid.write(w, 0, err.Error())
		return
	}
	if k == "" {
		m.next.ServeHTTP(w, r)
		return
	}
	l, err := adapter.Acquire(r.Context(), m.locks, m.o.namespace, k, m.o.ttl, m.o.wait, m.opts(r)...)
	if err != nil {
		var na *core.NotAcquiredError
		switch {
		case errors.As(err, &na):
			retryAfter(w, na.RetryAfter)
			m.busy.write(w, 0, "")
		case errors.Is(err, core.ErrInvalid):
			lockKeyInvalid.write(w, 0, "the lock key must be 1 to 1024 bytes")
		default:
			m.o.warn(r.Context(), "lockkit: httpmw: key lock unavailable", err, r)
			if m.o.failOpen {
				m.next.ServeHTTP(w, r)
				return
			}
			lockUnavailable.write(w, 0, "")
		}
		return
	}
	defer func() {
		if err := adapter.Release(r.Context(), l, m.o.ttl); err != nil {
			m.o.warn(context.WithoutCancel(r.Context()), "lockkit: httpmw: release failed", err, r)
		}
	}()
	m.next.ServeHTTP(w, r.WithContext(l.Context()))
}
