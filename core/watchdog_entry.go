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

// entryHeap orders the held entries by due time. Each slot keeps its entry's due time (at, from
// the watchdog's base): comparing two slots reads the slice, not two entries scattered over the
// heap of held locks (issue #38: with 100 000 locks, computing due for every comparison was half
// the client's CPU per renewal, in cache misses). The watchdog refreshes at whenever an entry's
// due time may have changed (watchdog.fix).
type entryHeap []heapSlot

// heapSlot is one entry of the heap and its due time.
type heapSlot struct {
	at time.Duration // e.due() − the watchdog's base
	e  *entry
}

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].e.idx = i; h[j].e.idx = j }
func (h *entryHeap) Push(x any)        { s := x.(heapSlot); s.e.idx = len(*h); *h = append(*h, s) }
func (h *entryHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = heapSlot{}
	*h = old[:len(old)-1]
	s.e.idx = -1
	return s
}

// fix places e in the heap, or moves it where its due time now puts it; the caller holds w.mu.
func (w *watchdog) fix(e *entry) {
	at := e.due().Sub(w.base)
	if e.idx < 0 {
		heap.Push(&w.h, heapSlot{at: at, e: e})
		return
	}
	w.h[e.idx].at = at
	heap.Fix(&w.h, e.idx)
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
	w.fix(e)
	return lostSet{locks: out}
}
