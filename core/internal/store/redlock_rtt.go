package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// The default Redlock node timeout follows each node's measured round trip: a node timeout derived
// from the TTL alone (TTL/20) is missed on a loaded host by nodes that do answer, in tens of
// milliseconds more, and then no acquisition reaches a quorum (CI at load 5–11: 0 locks in 41 s).
// The estimate only moves the timeout within [max(TTL/20, 10ms), TTL/3]; safety does not depend on
// it, since a grant's validity is TTL − elapsed − drift from when the request was sent.

// rtt is one node's round-trip estimate: RFC 6298's smoothed round trip and its variation, from the
// time each request to the node took (with the process's own scheduling delays, which is the point).
type rtt struct {
	mu     sync.Mutex
	srtt   time.Duration // 0: no sample yet
	rttvar time.Duration
}

// add records a request that took d; cut: it had not returned when its deadline passed, so its
// round trip is longer than d (counted as 2d: the timeout backs off, as TCP's does).
func (e *rtt) add(d time.Duration, cut bool) {
	if cut {
		d *= 2
	}
	e.mu.Lock()
	if e.srtt == 0 {
		e.srtt, e.rttvar = d, d/2
	} else {
		e.rttvar += (abs(e.srtt-d) - e.rttvar) / 4
		e.srtt += (d - e.srtt) / 8
	}
	e.mu.Unlock()
}

// timeout is the estimate's retransmission timeout (srtt + 4·rttvar), or unknown when no request
// to the node has returned yet.
func (e *rtt) timeout(unknown time.Duration) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srtt == 0 {
		return unknown
	}
	return e.srtt + 4*e.rttvar
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// nodeTimeout is how long one node may take to answer: WithNodeTimeout, or else the time within
// which a quorum of nodes is expected to answer from their round trips so far (the quorum-th
// smallest of their timeouts; a node not measured yet counts as the longest), at least TTL/20 and
// 10 ms, and at most TTL/3: a node slower than that could not renew the lock in time either.
func (rl *Redlock) nodeTimeout(ttl time.Duration) time.Duration {
	if rl.timeout > 0 {
		return rl.timeout
	}
	lo := max(ttl/20, 10*time.Millisecond)
	hi := max(ttl/3, lo)
	var buf [inlineNodes]time.Duration
	ts := buf[:0]
	for i := range rl.rtts {
		ts = append(ts, rl.rtts[i].timeout(hi))
	}
	// The quorum-th smallest (an insertion sort: a handful of nodes).
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j] < ts[j-1]; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
	return min(hi, max(lo, ts[rl.quorum-1]))
}

// measure records how long node i's request of a fan took, begun at f.began; ctx is the request's.
// A request its caller cancelled says nothing of the node.
func (f *fan) measure(ctx context.Context, i int) {
	if f.rtts == nil {
		return
	}
	err := ctx.Err()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	f.rtts[i].add(time.Since(f.began), err != nil)
}
