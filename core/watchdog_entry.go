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
