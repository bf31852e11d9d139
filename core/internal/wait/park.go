package wait

import (
	"context"
	"time"
)

// Parked says why Park returned.
type Parked uint8

const (
	// Woken: a release woke the waiter, or (Park with ready) its subscription was confirmed.
	Woken Parked = iota
	// Elapsed: the delay passed.
	Elapsed
	// Cancelled: the context ended.
	Cancelled
	// Deadline: the call's wait limit passed (its timer fires once: the call must end).
	Deadline
	// Closed: the Queues closed.
	Closed
)

// Park waits at most d for w: for its subscription to be confirmed (ready; at once when it is
// already), else to be woken; or until ctx ends, deadline fires or the Queues close. t is the
// caller's timer, kept from one Park to the next (made when nil).
func (r *Queues) Park(ctx context.Context, w *Waiter, ready bool, d time.Duration, deadline <-chan time.Time, t **time.Timer) Parked {
	ch := w.wake
	if ready {
		if ch = w.q.ready; isClosed(ch) {
			return Woken
		}
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	defer (*t).Stop() // (Go ≥ 1.23: no stale tick is received after Stop)
	select {
	case <-ch:
		return Woken
	case <-(*t).C:
		return Elapsed
	case <-ctx.Done():
		return Cancelled
	case <-deadline:
		return Deadline
	case <-r.closed:
		return Closed
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
