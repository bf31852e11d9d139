package core

import (
	"container/heap"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// entry is one held lock (key + owner token) as the watchdog sees it. Reentrant Locks of the same
// owner in this client share it.
type entry struct {
	k        *store.Keys
	tok      any // owner token
	ttl      time.Duration
	valid    time.Time // local validity deadline: last successful send + ttl − drift
	next     time.Time // next renewal
	idx      int       // heap index, -1 when not scheduled
	seq      uint64    // bumped by Extend: a renewal sent before carries an older seq
	counted  int       // holds reported to the hook as making the Client hold the lock (HoldInfo.Held)
	maxAt    time.Time // the earliest WithMaxHold deadline of its locks; zero: none
	inflight bool
	gone     bool
	lastErr  error
	one      [1]*Lock
	locks    []*Lock
}

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

type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].due().Before(h[j].due()) }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *entryHeap) Push(x any)        { e := x.(*entry); e.idx = len(*h); *h = append(*h, e) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
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
