package core

// kind is the kind of a hold: a lock (neither Read, Write nor Permits, fair or not), a write, a
// read or a permit. What the kinds share and exclude is the scripts' (one name, one lock:
// docs/guarantees.md, internal/script/lua/lock.lua).
type kind uint8

const (
	kindLock kind = iota
	kindWrite
	kindRead
	kindPermit
)

// String names the kind as Inspect and the hook report it.
func (k kind) String() string { return [...]string{"lock", "write", "read", "permit"}[k] }

// queued reports whether the kind's waiters queue in Redis and are handed the hold by a release
// (permits, reads and writes). A lock queues only when Fair.
func (k kind) queued() bool { return k != kindLock }

// rw reports whether the kind is a side of the read-write lock (Read, Write).
func (k kind) rw() bool { return k == kindWrite || k == kindRead }

// nestsIn reports whether a hold of kind k taken through the context of a hold of kind outer on
// the same name goes on (a re-entry or a nesting; initRW refuses an upgrade) instead of waiting.
func (k kind) nestsIn(outer kind) bool { return k == outer || k.rw() && outer.rw() }
