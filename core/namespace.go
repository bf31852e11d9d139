package core

import (
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// InNamespace puts the lock in namespace ns: the lock's name becomes Namespaced(ns, name), which
// is "@" + ns + "/" + name. Names given without this option must not start with '@' (Acquire
// refuses them with ErrInvalid), and ns is 1 to 64 of the characters a-z, 0-9 and '-', so no name,
// whatever bytes it holds, can leave its namespace or reach another one, nor a name used without a
// namespace. name itself may be any 1 to 1024 bytes.
//
// lockkit's adapters keep their locks in namespaces of their own ("http", "grpc", "asynq",
// "cron", ...), so a name taken from a client (a path value, a header) can only ever name a lock
// of that adapter. Code that must exclude an adapter's work locks in its namespace on purpose.
func InNamespace(ns string) AcquireOption { return func(o *acquireOptions) { o.ns = "@" + ns } }

// Namespaced returns the lock name that InNamespace(ns) gives name: "@" + ns + "/" + name. It is
// what Lock.Name returns, and the hash tag ("{" + Namespaced(ns, name) + "}") that a WithGuard or
// ReleaseSet key of the lock must contain.
func Namespaced(ns, name string) string { return "@" + ns + "/" + name }

// qualify validates name and ttl and returns the lock's full name (namespaced with InNamespace).
func (o *acquireOptions) qualify(name string, ttl time.Duration) (string, error) {
	if o.ns == "" {
		if p := store.NameProblem(name); p != "" {
			return "", invalid("%s", p)
		}
		return name, validTTL(ttl)
	}
	switch ns := o.ns[1:]; {
	case !store.ValidNamespace(ns):
		return "", invalid("namespace (%d bytes) must be 1 to %d of a-z, 0-9 and '-'", len(ns), store.MaxNamespace)
	case name == "" || len(name) > store.MaxName:
		return "", invalid("lock name is %d bytes, want 1 to %d", len(name), store.MaxName)
	default:
		return Namespaced(ns, name), validTTL(ttl)
	}
}
