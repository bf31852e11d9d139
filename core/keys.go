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
	arr     [5]string // prefix{name}, :fence, :queue, :queue:deadlines, :receipt:FENCE (all prefix{name}...)
	rel     [2]string // prefix{name}, prefix{name}:receipt:FENCE: what a release touches
	sem     *semKeys  // a semaphore's (Permits; see initSem), nil for a lock
}

func (k *keys) lock() string { return k.arr[0] }

// both is the lock hash and its fence counter.
func (k *keys) both() []string { return k.arr[:2] }

// fair adds the waiter queue and the waiters' deadlines.
func (k *keys) fair() []string { return k.arr[:4] }

// fairRelease adds the release receipt to fair's keys.
func (k *keys) fairRelease() []string { return k.arr[:5] }

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
	k.rel = [2]string{k.arr[0], k.arr[4]}
}

// held names the release receipt after the fence of the acquisition the holder took or entered
// (see drop in lib.lua): a replayed release then finds its own receipt, whatever other acquisitions
// of the name were released in between.
func (k *keys) held(fence int64) {
	k.arr[4] += ":" + strconv.FormatInt(fence, 10)
	k.rel[1] = k.arr[4]
}

// newToken returns 128 random bits, hex encoded.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	var h [32]byte
	hex.Encode(h[:], b[:])
	return string(h[:])
}
