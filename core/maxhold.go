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
// them): each context is cancelled with a *MaxHoldError, then the hold is released (Lock.end).
func (c *Client) endHolds(set lostSet) {
	ctx, cancel := context.WithTimeout(c.bgCtx, 5*time.Second) // the locks expire within their TTL anyway
	defer cancel()
	cause := func(l *Lock) error { return &MaxHoldError{Name: l.k.name, Limit: l.limit} }
	_ = endAll(ctx, set.locks, stateEnded, cause, giveNow)
}
