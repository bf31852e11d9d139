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
// earliest lease expires.
func (n *node) semAcquireCall(k *keys, r *acquireReq) (*redis.Script, []string, []any) {
	if r.fair {
		return n.s.sem.acquireFair, k.sem.acquire[:], []any{r.token, ms(r.ttl), r.limit, ms(r.waiterTTL), n.label}
	}
	return n.s.sem.acquire, k.sem.acquire[:4], []any{r.token, ms(r.ttl), r.limit, n.label}
}

// semRelease gives a permit back and wakes one waiter; it answers 0, or -1 when token holds no
// live permit.
func (n *node) semRelease(ctx context.Context, k *keys, token any, fair bool, payload any) (int64, error) {
	s := k.sem
	keys := []string{k.arr[0], s.limits, s.fences, k.arr[4], k.arr[2], k.arr[3]}
	f := "0"
	if fair {
		f = "1"
	}
	return n.s.sem.release.Run(ctx, n.rdb, keys, token, n.pubCmd, payload, f).Int64()
}

// semDequeue takes a fair waiter that gives up out of the queue, waking the next if the free
// permit was meant for it.
func (n *node) semDequeue(ctx context.Context, k *keys, token any) error {
	keys := []string{k.arr[0], k.sem.limits, k.arr[2], k.arr[3]}
	return n.s.sem.dequeue.Run(ctx, n.rdb, keys, token, n.pubCmd, k.sem.limit).Err()
}
