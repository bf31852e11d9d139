package core

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
)

// keys holds the Redis names of one lock or one semaphore (docs/keys.md is the schema). Every key
// carries the {name} hash tag, so on a cluster they share a slot. A lock's names are substrings of
// one string, so computing them costs a single allocation.
type keys struct {
	name    string
	main    string   // the lock; a semaphore's permits (ZSET token -> lease expiry)
	channel string   // main + ":released"
	queue   string   // the Redis-side queue of waiters (fair lock, semaphore): main + ":queue"
	dls     string   // its waiters' deadlines: main + ":queue:deadlines"
	sem     *semKeys // a semaphore's other keys (Permits), nil for a lock
	fence   int64    // the fence of the acquisition held (see held)
	fenceA  any      // fence, boxed once
}

// semKeys are a semaphore's other names and its limit.
type semKeys struct {
	limit                         int
	limits, fences, lock, receipt string // lock: the name's lock key (one name, one lock)
	strict                        bool   // a read-write lock's: strict FIFO (sem_acquire.lua's fair '2')
}

// init sets k to the keys of the lock name.
func (k *keys) init(prefix, name string) {
	// One concatenation: main built apart first would be a second allocation once it is longer
	// than the compiler's stack buffer (32 bytes).
	s := prefix + "{" + name + "}:released" + prefix + "{" + name + "}:queue:deadlines"
	k.slice(name, s, len(prefix)+len(name)+2)
}

// setMain sets the names derived from main: its release channel, queue and deadlines.
func (k *keys) setMain(name, main string) {
	k.slice(name, main+":released"+main+":queue:deadlines", len(main))
}

// slice sets k's names from s, main + ":released" + main + ":queue:deadlines" with main n bytes
// long: each name is a substring of s.
func (k *keys) slice(name, s string, n int) {
	q := n + len(":released")
	k.name, k.main = name, s[:n]
	k.channel = s[:q]
	k.queue = s[q : q+n+len(":queue")]
	k.dls = s[q:]
}

// initSem sets k to the keys of the semaphore name: prefix{name}:permits (ZSET token -> lease
// expiry), :permits:limits (ZSET token -> limit), :permits:fences (HASH token -> fence, token NUL
// -> holder label), :permits:queue (+ :deadlines, queue.lua), :permits:receipt and the name's lock
// key prefix{name}, which holds the family's mark and the name's fence while permits are held.
func (k *keys) initSem(prefix, name string, limit int) {
	tag := prefix + "{" + name + "}"
	p := tag + ":permits"
	k.setMain(name, p)
	k.sem = &semKeys{limit: limit, limits: p + ":limits", fences: p + ":fences", lock: tag,
		receipt: p + ":receipt"}
}

// initRW sets k to the keys of the read-write lock name, whose lock key is tag (prefix{name}): a
// semaphore's keys under tag:rw (tag:rw ZSET token -> lease expiry, :rw:limits, :rw:fences,
// :rw:queue, :rw:receipt; docs/keys.md) and the lock key itself, limit being 1 for a writer.
func (k *keys) initRW(tag, name string, limit int) {
	m := tag + rwSuffix
	k.setMain(name, m)
	k.sem = &semKeys{limit: limit, limits: m + ":limits", fences: m + ":fences", lock: tag,
		receipt: m + ":receipt", strict: true}
}

// rwSuffix follows a lock's key in the keys of the read-write lock of the same name.
const rwSuffix = ":rw"

// fairArg is sem_acquire's and sem_release's fair argument: '2' (strict FIFO) for a read-write
// lock, else '1' for a Fair caller, '0' otherwise.
func (s *semKeys) fairArg(fair bool) string {
	switch {
	case s.strict:
		return "2"
	case fair:
		return "1"
	}
	return "0"
}

// held records the fence of the acquisition the holder took or entered. A lock's release passes it
// (a replayed release finds it in the lock's chain of owner releases, lk_drop in lock.lua); a
// permit's release receipt is named after it, so a replayed release finds its own receipt whatever
// other permits were released in between.
func (k *keys) held(fence int64) {
	k.fence, k.fenceA = fence, fence
	if k.sem != nil {
		s := *k.sem
		s.receipt += ":" + strconv.FormatInt(fence, 10)
		k.sem = &s
	}
}

// givenBack returns the keys a give-back of token's acquisition releases with (see giveBack): the
// fence is unknown then, so a permit's release receipt is named after the token instead. Under the
// permits' bare receipt name, the receipt another give-back of the name left could answer
// "released" for a permit that has not reached Redis yet, and the give-back would stop trying.
func (k keys) givenBack(token string) keys {
	if k.sem != nil && k.fence == 0 {
		s := *k.sem
		s.receipt += ":t:" + token
		k.sem = &s
	}
	return k
}

// fenceArg is the held acquisition's fence as a script argument.
func (k *keys) fenceArg() any {
	if k.fenceA == nil {
		return k.fence
	}
	return k.fenceA
}

// newToken returns 128 random bits, hex encoded.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	var h [32]byte
	hex.Encode(h[:], b[:])
	return string(h[:])
}
