package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// The default node timeout follows the nodes' round trips (nodeTimeout): TTL/20 alone is missed on
// a loaded host by nodes that do answer, and then no acquisition reaches a quorum (CI at load
// 5–11: 0 locks in 41 s). Safety does not depend on it: a grant's validity, TTL − elapsed −
// drift, counts from when its request was sent.

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
		e.rttvar += (max(e.srtt-d, d-e.srtt) - e.rttvar) / 4
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

// nodeTimeout is how long one node may take to answer: WithNodeTimeout, or else the quorum-th
// smallest of the nodes' timeouts (a node not measured yet counts as the longest), at least
// TTL/20 and 10 ms, and at most TTL/3: a node slower than that could not renew the lock in time.
func (rl *Redlock) nodeTimeout(ttl time.Duration) time.Duration {
	if rl.opt.NodeTimeout > 0 {
		return rl.opt.NodeTimeout
	}
	lo := max(ttl/20, 10*time.Millisecond)
	hi := max(ttl/3, lo)
	var buf [inlineNodes]time.Duration
	ts := buf[:0]
	for i := range rl.rtts {
		ts = append(ts, rl.rtts[i].timeout(hi))
	}
	slices.Sort(ts)
	return min(hi, max(lo, ts[rl.quorum-1]))
}

// measure records how long node i's request of a fan took, begun at f.began; ctx is the request's.
// A request its caller cancelled says nothing of the node; WithNodeTimeout needs no estimate.
func (f *fan[T]) measure(ctx context.Context, i int) {
	err := ctx.Err()
	if f.rl.opt.NodeTimeout > 0 || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	f.rl.rtts[i].add(time.Since(f.began), err != nil)
}
