package core

import (
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

// The heap's operations, typed (container/heap would box every slot it pushes and pops: two
// allocations per lock + unlock). The caller holds w.mu.

func (h entryHeap) swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].e.idx = i; h[j].e.idx = j }

func (h entryHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if h[i].at <= h[j].at {
			return
		}
		h.swap(i, j)
		j = i
	}
}

func (h entryHeap) down(i int) bool {
	i0, n := i, len(h)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && h[r].at < h[j].at {
			j = r
		}
		if h[i].at <= h[j].at {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// remove takes the slot at i out of the heap.
func (h *entryHeap) remove(i int) {
	old, n := *h, len(*h)-1
	e := old[i].e
	if i != n {
		old.swap(i, n)
	}
	old[n] = heapSlot{}
	*h = old[:n]
	if i != n {
		h.fixAt(i)
	}
	e.idx = -1
}

// fixAt restores the heap after the slot at i changed; it reports whether it moved down.
func (h entryHeap) fixAt(i int) bool {
	if h.down(i) {
		return true
	}
	h.up(i)
	return false
}

// fix places e in the heap, or moves it where its due time now puts it; the caller holds w.mu.
func (w *watchdog) fix(e *entry) {
	at := e.due().Sub(w.base)
	if e.idx < 0 {
		e.idx = len(w.h)
		w.h = append(w.h, heapSlot{at: at, e: e})
		w.h.up(e.idx)
		return
	}
	w.h[e.idx].at = at
	w.h.fixAt(e.idx)
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
