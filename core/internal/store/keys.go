package store

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"

	"github.com/lockkit/lockkit/core/internal/script"
)

// Keys holds the Redis names of one lock or one semaphore (docs/keys.md is the schema). Every key
// carries the {name} hash tag, so on a cluster they share a slot. A lock's names are substrings of
// one string, so computing them costs a single allocation.
type Keys struct {
	Name      string
	Main      string   // the lock; a semaphore's permits (ZSET token -> lease expiry)
	Channel   string   // main + ":released"
	Queue     string   // the Redis-side queue of waiters (fair lock, semaphore): main + ":queue"
	Deadlines string   // its waiters' deadlines: main + ":queue:deadlines"
	Sem       *SemKeys // a semaphore's other keys (Permits), nil for a lock
	Fence     int64    // the fence of the acquisition held (see Held)
	// MainArg is a lock's Main boxed once (the LockArg of script.Acquire and script.Release): its
	// acquire and release calls share it. Nil for a semaphore's keys.
	MainArg any
	// Lines is room for the command lines of a lock's first acquire attempt and of its release
	// (script.Line), held by its Lock; nil: each call allocates its own.
	Lines *script.Lines
}

// SemKeys are a semaphore's other names and its limit.
type SemKeys struct {
	Limit                         int
	Limits, Fences, Lock, Receipt string // lock: the name's lock key (one name, one lock)
	Strict                        bool   // a read-write lock's: strict FIFO (sem_acquire.lua's fair '2')
}

// Init sets k to the keys of the lock name.
func (k *Keys) Init(prefix, name string) {
	// One concatenation: main built apart first would be a second allocation once it is longer
	// than the compiler's stack buffer (32 bytes).
	s := prefix + "{" + name + "}:released" + prefix + "{" + name + "}:queue:deadlines"
	k.slice(name, s, len(prefix)+len(name)+2)
	k.MainArg = k.Main
}

// InitNew is Init, and returns a new token (NewToken) cut from the same allocation as the keys.
func (k *Keys) InitNew(prefix, name string) (token string) {
	var h [32]byte
	newToken(&h)
	s := prefix + "{" + name + "}:released" + prefix + "{" + name + "}:queue:deadlines" + string(h[:])
	keys := len(s) - len(h)
	k.slice(name, s[:keys], len(prefix)+len(name)+2)
	k.MainArg = k.Main
	return s[keys:]
}

// slice sets k's names from s, main + ":released" + main + ":queue:deadlines" with main n bytes
// long: each name is a substring of s.
func (k *Keys) slice(name, s string, n int) {
	q := n + len(":released")
	k.Name, k.Main = name, s[:n]
	k.Channel = s[:q]
	k.Queue = s[q : q+n+len(":queue")]
	k.Deadlines = s[q:]
}

// InitSem sets k to the keys of the semaphore name (prefix{name}:permits and the keys under it,
// docs/keys.md) and the name's lock key prefix{name}, which holds the family's mark and the
// name's fence while permits are held.
func (k *Keys) InitSem(prefix, name string, limit int) {
	tag := prefix + "{" + name + "}"
	k.initSem(name, tag, tag+":permits", limit, false)
}

// InitRW sets k to the keys of the read-write lock name, whose lock key is tag (prefix{name}): a
// semaphore's keys under tag:rw (docs/keys.md) and the lock key itself, limit 1 for a writer.
func (k *Keys) InitRW(tag, name string, limit int) {
	k.initSem(name, tag, tag+RWSuffix, limit, true)
}

// initSem sets k to the keys of a semaphore of name whose permits are main, and lock key tag.
func (k *Keys) initSem(name, tag, main string, limit int, strict bool) {
	k.slice(name, main+":released"+main+":queue:deadlines", len(main))
	k.Sem = &SemKeys{Limit: limit, Limits: main + ":limits", Fences: main + ":fences", Lock: tag,
		Receipt: main + ":receipt", Strict: strict}
}

// RWSuffix follows a lock's key in the keys of the read-write lock of the same name.
const RWSuffix = ":rw"

// fairArg is the semaphore scripts' fair argument: '2' (strict FIFO) for a read-write lock, else
// '1' for a Fair caller, '0' otherwise.
func (s *SemKeys) fairArg(fair bool) string {
	switch {
	case s.Strict:
		return "2"
	case fair:
		return "1"
	}
	return "0"
}

// Held records the fence of the acquisition the holder took or entered, once per Keys (script
// arguments point at Fence). A lock's release passes it (a replayed release finds it in the lock's
// chain of owner releases); a permit's release receipt is named after it, so that a replayed
// release finds its own receipt whatever other permits were released in between.
func (k *Keys) Held(fence int64) {
	k.Fence = fence
	if k.Sem != nil {
		s := *k.Sem
		s.Receipt += ":" + strconv.FormatInt(fence, 10)
		k.Sem = &s
	}
}

// GivenBack returns the keys a give-back of token's acquisition releases with: the fence is
// unknown, so a permit's receipt is named after the token. Under the bare name, another give-back's
// receipt could answer "released" for a permit that has not reached Redis yet.
func (k Keys) GivenBack(token string) Keys {
	if k.Sem != nil && k.Fence == 0 {
		s := *k.Sem
		s.Receipt += ":t:" + token
		k.Sem = &s
	}
	return k
}

// sentFence is the held acquisition's fence as a release's argument that counts its sends
// (script.Sends, in k.Lines), when k has Lines (not over Redlock); else nil.
func (k *Keys) sentFence() *script.Sends {
	if k.Lines == nil || k.Fence == 0 {
		return nil
	}
	k.Lines.Fence.Set(k.Fence)
	return &k.Lines.Fence
}

// fenceArg is the held acquisition's fence as a script argument: 0 before Held (unknown), then
// &Fence, which go-redis writes as the number and which boxes without an allocation.
func (k *Keys) fenceArg() any {
	if k.Fence == 0 {
		return int64(0)
	}
	return &k.Fence
}

// NewToken returns 128 random bits, hex encoded.
func NewToken() string {
	var h [32]byte
	newToken(&h)
	return string(h[:])
}

// newToken writes a new token (NewToken) to h.
func newToken(h *[32]byte) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	hex.Encode(h[:], b[:])
}

// acquireLine and releaseLine are the Lines' rooms (nil without Lines).
func (k *Keys) acquireLine() *script.Line {
	if k.Lines == nil {
		return nil
	}
	return &k.Lines.Acquire
}

func (k *Keys) releaseLine() *script.Line {
	if k.Lines == nil {
		return nil
	}
	return &k.Lines.Release
}
