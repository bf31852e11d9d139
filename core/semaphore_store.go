package core

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// semScripts are the semaphore's scripts (Permits), kept apart from the lock's.
type semScripts struct {
	acquire, acquireFair, release, renew, pttl, dequeue *redis.Script
}

func loadSemScripts() semScripts {
	return semScripts{
		acquire:     mustScript("lib.lua", "sem_lib.lua", "sem_acquire.lua"),
		acquireFair: mustScript("lib.lua", "sem_lib.lua", "sem_acquire_fair.lua"),
		release:     mustScript("lib.lua", "sem_lib.lua", "sem_release.lua"),
		renew:       mustScript("lib.lua", "sem_lib.lua", "sem_renew.lua"),
		pttl:        mustScript("lib.lua", "sem_lib.lua", "sem_pttl.lua"),
		dequeue:     mustScript("lib.lua", "sem_lib.lua", "sem_dequeue.lua"),
	}
}

// semAcquireCall returns the script, keys and arguments of a permit's acquire attempt. A granted
// permit answers its fence, as a fresh lock does; a refusal answers -1 - the time until the
// earliest lease expires. A waiting call (r.waiterTTL > 0) is queued in Redis by the attempt, with
// r.hold, which holds the attempt's number for a permit (its epoch, see waitCall.claim).
func (n *node) semAcquireCall(k *keys, r *acquireReq) (*redis.Script, []string, []any) {
	if r.fair {
		return n.s.sem.acquireFair, k.sem.acquire[:], []any{r.token, ms(r.ttl), r.limit, ms(r.waiterTTL), n.label, r.hold}
	}
	return n.s.sem.acquire, k.sem.acquire[:], []any{r.token, ms(r.ttl), r.limit, n.label, ms(r.waiterTTL), r.hold}
}

// semRelease gives a permit back: to the first queued waiter directly, else by waking one; it
// answers 0, or -1 when token holds no live permit.
func (n *node) semRelease(ctx context.Context, k *keys, token any, fair bool, payload any) (int64, error) {
	s := k.sem
	keys := []string{k.arr[0], s.limits, s.fences, k.arr[4], k.arr[2], k.arr[3], s.waiters, k.arr[1]}
	f := "0"
	if fair {
		f = "1"
	}
	return n.s.sem.release.Run(ctx, n.rdb, keys, token, n.pubCmd, payload, f).Int64()
}

// semDequeue takes a waiter that gives up out of the queue; a permit a release granted it
// meanwhile is handed on, and in fair mode the next waiter is woken if the free permit was meant
// for it.
func (n *node) semDequeue(ctx context.Context, k *keys, token any) error {
	s := k.sem
	keys := []string{k.arr[0], s.limits, s.fences, k.arr[1], k.arr[2], k.arr[3], s.waiters}
	return n.s.sem.dequeue.Run(ctx, n.rdb, keys, token, n.pubCmd, s.limit, n.id).Err()
}
