package core

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
)

// keys holds the Redis names of one lock. All are substrings of one string, so computing them costs
// a single allocation, and the key lists passed to scripts are slices of arr, so they cost none.
// Every key carries the {name} hash tag, so on a cluster they share a slot.
type keys struct {
	name    string
	channel string    // prefix{name}:released
	arr     [5]string // prefix{name}, :fence, :queue, :queue:deadlines, :receipt (all prefix{name}...)
	rel     [2]string // a permit's: permits, its release receipt (see initSem)
	sem     *semKeys  // a semaphore's (Permits; see initSem), nil for a lock
	fence   int64     // the fence of the acquisition held (see held)
	fenceA  any       // fence, boxed once
}

func (k *keys) lock() string { return k.arr[0] }

// fair adds the waiter queue and the waiters' deadlines.
func (k *keys) fair() []string { return k.arr[:4] }

func (k *keys) init(prefix, name string) {
	lock := prefix + "{" + name + "}"
	n := len(lock)
	s := lock + ":fence" + lock + ":released" + lock + ":queue:deadlines" + lock + ":receipt"
	ch := n + len(":fence")
	q := ch + n + len(":released")
	r := q + n + len(":queue:deadlines")
	k.name = name
	k.channel = s[ch:q]
	k.arr = [5]string{s[:n], s[:ch], s[q : q+n+len(":queue")], s[q:r], s[r:]}
}

// held records the fence of the acquisition the holder took or entered. A lock's release passes it
// (a replayed release finds it among the lock's release receipts, see lk_drop in lock_lib.lua); a
// permit's release receipt is named after it (see initSem), so a replayed release finds its own
// receipt whatever other permits were released in between.
func (k *keys) held(fence int64) {
	k.fence, k.fenceA = fence, fence
	if k.sem != nil {
		k.arr[4] += ":" + strconv.FormatInt(fence, 10)
		k.rel[1] = k.arr[4]
	}
}

// givenBack returns the keys a give-back of token's acquisition releases with (see giveBack): the
// fence is unknown then, so a permit's release receipt is named after the token instead. Under
// the permits' bare receipt name, the receipt another give-back of the name left could answer
// "released" for a permit that has not reached Redis yet, and the give-back would stop trying.
func (k keys) givenBack(token string) keys {
	if k.sem != nil && k.fence == 0 {
		k.arr[4] += ":t:" + token
		k.rel[1] = k.arr[4]
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
