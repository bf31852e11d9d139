package core

import (
	"container/heap"
	"context"
	"time"
)

// WithMaxHold's deadlines live in the watchdog's heap: an entry is due at the earliest of its next
// renewal, its validity deadline and its locks' maximum-hold deadlines.

// setMaxAt recomputes e.maxAt from its locks.
func (e *entry) setMaxAt() {
	e.maxAt = time.Time{}
	for _, l := range e.locks {
		if !l.maxAt.IsZero() && (e.maxAt.IsZero() || l.maxAt.Before(e.maxAt)) {
			e.maxAt = l.maxAt
		}
	}
}

// ended removes from e the locks whose WithMaxHold deadline passed at now and returns them; the
// caller holds w.mu and has e in the heap. The entry is renewed on for the holds left.
func (w *watchdog) ended(e *entry, now time.Time) lostSet {
	var out []*Lock
	kept := e.locks[:0]
	for _, l := range e.locks {
		if !l.maxAt.IsZero() && !now.Before(l.maxAt) {
			out = append(out, l)
		} else {
			kept = append(kept, l)
		}
	}
	clear(e.locks[len(kept):])
	e.locks = kept
	if len(kept) == 0 {
		w.unschedule(e)
		if len(out) > 0 {
			w.ends(e, out[len(out)-1])
		}
		return lostSet{locks: out}
	}
	e.setMaxAt()
	heap.Fix(&w.h, e.idx)
	return lostSet{locks: out}
}

// endHolds ends holds whose WithMaxHold deadline passed (the watchdog no longer renews them for
// them): each context is cancelled with a *MaxHoldError, then the hold is released.
func (c *Client) endHolds(set lostSet) {
	locks := set.locks
	// Mark every one ended before cancelling any: a nested hold's context derives from its outer
	// hold's, and its holder must not find it still held once its context is done.
	ended := locks[:0:0]
	for _, l := range locks {
		cause := &MaxHoldError{Name: l.k.name, Limit: l.limit}
		l.mu.Lock()
		if l.state == stateHeld { // not released or lost meanwhile
			l.state, l.cause = stateEnded, cause
			ended = append(ended, l)
		}
		l.mu.Unlock()
	}
	for _, l := range ended {
		l.cancel(l.cause)
	}
	for _, l := range ended {
		ctx, cancel := context.WithTimeout(c.bgCtx, min(l.ttl, 5*time.Second))
		n, err := c.st.release(ctx, &l.k, l.tok, l.hold, l.fair, l.ttl)
		cancel()
		if err != nil {
			err = unavailable("release", err)
		}
		l.reportReleased(max(n, 0), err)
	}
}
