package core

import (
	"time"
)

func (e *entry) due() time.Time {
	d := e.next
	if e.inflight || e.valid.Before(d) {
		d = e.valid
	}
	if !e.maxAt.IsZero() && e.maxAt.Before(d) {
		d = e.maxAt
	}
	return d
}

// fix places e in the heap, or moves it where its due time now puts it; the caller holds w.mu.
func (w *watchdog) fix(e *entry) {
	w.h.Set(e, e.due().Sub(w.base))
}

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
