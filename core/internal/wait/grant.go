package wait

import (
	"strconv"
	"strings"
)

// Direct handoff (fair locks and semaphores): a waiter is queued in Redis by its acquire attempts,
// with what a grant needs (TTL, label, hold; a permit's limit). A release of the lock's last hold
// or of a permit (or a waiter that gives up holding a grant) gives the lock or the freed permit to
// the live waiter at the head of that queue inside the script, as the waiter's own acquisition
// would (fence, TTL, holder), and publishes "g:" SHA1(token) ":" fence ":" epoch. The waiter's
// Client wakes it with the grant, and it holds at once, without another round trip (claim).
//
// The epoch names the waiter's queueing: the server's clock in µs when the attempt that queued it
// ran (queue.lua, the same for fair locks and permits), which every later attempt of the waiter
// answers. Either way the grant was made after the waiter's last attempt ran: a grant made before
// it would have been answered by the attempt itself (an attempt by a token holding a live permit,
// or the lock with this hold, answers it, lengthened to a full TTL). So the waiter counts its
// lease from when it sent that attempt: its local deadline is never later than the lease in
// Redis. A grant for another epoch is stale (its lease was reclaimed or lost, and the waiter
// queued again since) and is ignored. A waiter that gives up dequeues itself, handing on a lock or
// permit it was granted meanwhile; a waiter that died leaves its grant to expire with its TTL,
// like a crashed holder.

// grantPrefix marks the release messages that grant a lock or a permit to a named waiter.
const grantPrefix = "g:"

// Grant is a lock or permit a release granted to a waiter.
type Grant struct {
	Fence, Epoch int64
	OK           bool
}

// parseGrant reads a grant message: the waiter's token digest, the fence and the epoch.
func parseGrant(payload string) (digest string, g Grant) {
	rest, _ := strings.CutPrefix(payload, grantPrefix)
	digest, rest, ok1 := strings.Cut(rest, ":")
	f, e, ok2 := strings.Cut(rest, ":")
	fence, err1 := strconv.ParseInt(f, 10, 64)
	epoch, err2 := strconv.ParseInt(e, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || fence <= 0 {
		return "", Grant{}
	}
	return digest, Grant{Fence: fence, Epoch: epoch, OK: true}
}
