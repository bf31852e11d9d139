package httpmw

import (
	"net/http"

	"github.com/lockkit/lockkit/core"
)

// Limit returns a middleware that lets at most n requests sharing a key run at once (1 to 100000),
// across every replica that shares the Redis of locks: a per-key concurrency limiter over a core
// semaphore (core.Permits). A request whose KeyFunc gives a key takes one of the key's n permits,
// runs the handler with the permit's context (cancelled if the permit is lost) and gives the permit
// back, also if the handler panics. When all n are taken it waits up to WithWait (default 0:
// answer at once; never past the request's context), then answers 429 with Retry-After (problem
// "concurrency-limit"); Redis down gives 503 unless FailOpen. A permit of a crashed replica frees
// itself after WithTTL (default 10s).
//
// Options are KeyLock's (WithTTL, WithWait, WithNamespace, FailOpen, WithLogger); the semaphore of
// key K lives in the namespace ("http" by default) apart from KeyLock's lock of K: the two never
// exclude each other. Replicas should pass the same n (when they differ, a request is let in only
// while fewer than its own n and every running request's n are running, see core.Permits).
// core.FromContext(r.Context()) gives the permit (Fence, Limit). Uncontended, a request costs two
// round trips to Redis. Limit panics if locks or key is nil, n is out of range, or an option is
// invalid.
func Limit(locks *core.Client, key KeyFunc, n int, opts ...KeyLockOption) func(http.Handler) http.Handler {
	if locks == nil || key == nil {
		panic(invalidOption("Limit needs a *core.Client and a KeyFunc"))
	}
	if n < 1 || n > 100000 {
		panic(invalidOption("Limit(%d): n must be 1 to 100000", n))
	}
	o := defaultOptions(0)
	for _, f := range opts {
		f.applyKeyLock(&o)
	}
	o = o.checked()
	if o.readWrite {
		panic(invalidOption("WithReadWrite is for KeyLock: Limit takes permits"))
	}
	extra := []core.AcquireOption{core.Permits(n)}
	return func(next http.Handler) http.Handler {
		return &keyLock{locks: locks, key: key, next: next, o: &o, extra: extra, busy: concurrencyLimit}
	}
}
