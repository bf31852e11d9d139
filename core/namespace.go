package core

import "time"

// maxNamespaceLen bounds a namespace, so that a namespaced name stays within a few bytes of
// maxNameLen.
const maxNamespaceLen = 64

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

// validNamespace reports whether ns may name a namespace.
func validNamespace(ns string) bool {
	if ns == "" || len(ns) > maxNamespaceLen {
		return false
	}
	for i := 0; i < len(ns); i++ {
		if c := ns[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// qualify validates name and ttl and returns the lock's full name: name itself, or its
// namespaced form with InNamespace.
func (o *acquireOptions) qualify(name string, ttl time.Duration) (string, error) {
	if o.ns == "" {
		return name, validate(name, ttl)
	}
	switch ns := o.ns[1:]; {
	case !validNamespace(ns):
		return "", invalid("namespace (%d bytes) must be 1 to %d of a-z, 0-9 and '-'", len(ns), maxNamespaceLen)
	case name == "" || len(name) > maxNameLen:
		return "", invalid("lock name is %d bytes, want 1 to %d", len(name), maxNameLen)
	default:
		return Namespaced(ns, name), validTTL(ttl)
	}
}
