package chaos_test

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// keyBound bounds, for each hold of the starved child, the latest moment its key could still be in
// Redis: after every acquisition and every successful renewal (core's Renewed hook, which runs once
// the watchdog counted it), it asks Redis, on a client of its own, when the key expires
// (PEXPIRETIME) and keeps the largest bound per hold (by key and fence). Moments are on the host's clock,
// which the child, the parent and Redis share.
//
// The bound is conservative in the direction that keeps the oracle exact: a context found live at
// or after it was live once its key was certainly gone (anyone could be granted the name). Only a
// command that succeeded lengthens a hold's key (core extends a hold's validity on no other), and
// each one is followed by a read, which finds:
//   - the hold's key, with the expiry that command set or a later one: Redis keeps a key while its
//     clock in ms is at most its expiry (it expires a key when now > expiry; scripts compare with
//     the time they started), so the key lasts at most until expiry + 1 ms;
//   - another value (the next holder's, or the free value a release leaves, whose expiry is
//     later), or none: the hold's key was gone by the read's reply, the bound's floor.
//
// A failed renewal lengthens nothing and has no read (its "not owner" read would bound the next
// holder's key, hiding the gap). A renewal whose reply was lost could have lengthened the key
// unseen; core does not count it either, so a context that outlives the last expiry the child saw
// outlives core's own validity deadline: a fault of core all the same.
type keyBound struct {
	probe *redis.Client // a client without core, for the reads

	mu    sync.Mutex
	until map[holdID]int64 // the bound (Unix ns); at most maxBoundHolds holds
}

// holdID names a hold: its lock's key and its fence.
type holdID struct {
	key   string
	fence int64
}

// maxBoundHolds caps the holds a keyBound keeps (a full run takes about 60).
const maxBoundHolds = 1024

func newKeyBound(probe *redis.Client) *keyBound {
	return &keyBound{probe: probe, until: map[holdID]int64{}}
}

// hook returns the core.Hook that reads the key after each successful renewal.
func (k *keyBound) hook() core.Hook {
	return core.Hook{Renewed: func(_ context.Context, in core.HoldInfo) {
		if in.Renewed && in.Err == nil {
			k.read(holdID{in.Lock.Key(), in.Lock.Fence()})
		}
	}}
}

// read bounds the key of hold h after one of its commands succeeded.
func (k *keyBound) read(h holdID) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exp, err := k.probe.Do(ctx, "PEXPIRETIME", h.key).Int64()
	recv := time.Now().UnixNano()
	var u int64
	switch {
	case err != nil || exp == -1: // (no bound: never flagged)
		u = math.MaxInt64
	case exp == -2: // (gone by the reply)
		u = recv
	default:
		u = max(recv, (exp+1)*int64(time.Millisecond))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.until[h]; ok || len(k.until) < maxBoundHolds {
		k.until[h] = max(k.until[h], u)
	}
}

// bound returns the latest moment the key of hold h could still be in Redis (MaxInt64 when nothing
// bounds it). Call it once the Client is closed: a renewal's hook may run after its hold's release.
func (k *keyBound) bound(h holdID) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if u, ok := k.until[h]; ok {
		return u
	}
	return math.MaxInt64
}
