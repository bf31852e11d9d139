package core

// kind is the kind of a hold: a lock (neither Read, Write nor Permits, fair or not), a write, a
// read or a permit. It is the one place core asks which kind a hold is; what the kinds share and
// exclude is the scripts' (one name, one lock: docs/guarantees.md). While reads, a write or
// permits are held, the name's lock key holds their family's mark (internal/script/lua/lock.lua),
// which keeps every other kind out and carries the name's one sequence of fences.
type kind uint8

const (
	kindLock kind = iota
	kindWrite
	kindRead
	kindPermit
)

// String names the kind as Inspect and the hook report it.
func (k kind) String() string { return [...]string{"lock", "write", "read", "permit"}[k] }

// queued reports whether the kind's waiters queue in Redis, FIFO across processes, and are handed
// the hold by a release (the name's semaphore keys: permits, reads and writes). A lock waits on
// its own key, and queues only when Fair.
func (k kind) queued() bool { return k != kindLock }

// rw reports whether the kind is a side of the read-write lock (Read, Write).
func (k kind) rw() bool { return k == kindWrite || k == kindRead }

// nestsIn reports whether a hold of kind k taken through the context of a hold of kind outer on
// the same name goes on (a re-entry, a hold nested in a write or a read in a read, or an upgrade,
// which initRW refuses) rather than waiting for that hold.
func (k kind) nestsIn(outer kind) bool { return k == outer || k.rw() && outer.rw() }
