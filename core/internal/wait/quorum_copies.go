package wait

import "time"

// quorumCopies counts the copies of a Redlock release message: every node publishes the release,
// and a wake-up is due on the quorum-th copy, when a quorum of nodes is free (an earlier attempt
// would fail). The rest are ignored. Guarded by the queues' mutex.
type quorumCopies struct {
	need int
	seen map[string]seenMsg
}

type seenMsg struct {
	copies int
	at     time.Time
}

// count records a copy of payload on ch and reports whether it is the quorum-th.
func (c *quorumCopies) count(ch, payload string) bool {
	key := ch + "\x00" + payload
	n := c.seen[key]
	n.copies++
	if n.copies == 1 {
		n.at = time.Now()
	}
	c.seen[key] = n
	return n.copies == c.need
}

// sweep forgets messages older than idleAfter.
func (c *quorumCopies) sweep(now time.Time) {
	for k, m := range c.seen {
		if now.Sub(m.at) > idleAfter {
			delete(c.seen, k)
		}
	}
}
