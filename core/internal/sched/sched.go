// Package sched is the watchdog's schedule: a binary min-heap of items by due time.
//
// It is typed (container/heap would box every item: two allocations per lock and unlock), and each
// slot keeps its item's due time, so that comparing two slots reads the slice, not two items
// scattered over memory (issue #38: with 100,000 locks, the cache misses of computing due times in
// comparisons were half the client's CPU per renewal).
package sched

import "time"

// Item is what a Heap holds: a pointer that keeps its own place in the heap (-1 when it is not in
// it), so that Set and Remove find it without a search.
type Item interface{ Place() *int }

// Heap orders items by due time, an offset from a base the caller keeps. The zero Heap is empty
// and ready; the caller serialises access.
type Heap[T Item] struct{ s []slot[T] }

type slot[T Item] struct {
	at time.Duration
	it T
}

// Len returns the number of items in the heap.
func (h *Heap[T]) Len() int { return len(h.s) }

// Min returns the item due first; the heap must not be empty.
func (h *Heap[T]) Min() T { return h.s[0].it }

// Set puts it in the heap due at at, or moves it there if it is in the heap already.
func (h *Heap[T]) Set(it T, at time.Duration) {
	p := it.Place()
	if *p < 0 {
		*p = len(h.s)
		h.s = append(h.s, slot[T]{at: at, it: it})
		h.up(*p)
		return
	}
	h.s[*p].at = at
	if !h.down(*p) {
		h.up(*p)
	}
}

// Remove takes it out of the heap; it must be in it.
func (h *Heap[T]) Remove(it T) {
	p := it.Place()
	i, n := *p, len(h.s)-1
	h.swap(i, n)
	h.s[n] = slot[T]{}
	h.s = h.s[:n]
	if i != n && !h.down(i) {
		h.up(i)
	}
	*p = -1
}

func (h *Heap[T]) swap(i, j int) {
	s := h.s
	s[i], s[j] = s[j], s[i]
	*s[i].it.Place(), *s[j].it.Place() = i, j
}

func (h *Heap[T]) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if h.s[i].at <= h.s[j].at {
			return
		}
		h.swap(i, j)
		j = i
	}
}

// down moves the slot at i down to its place; it reports whether it moved.
func (h *Heap[T]) down(i int) bool {
	i0, n := i, len(h.s)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && h.s[r].at < h.s[j].at {
			j = r
		}
		if h.s[i].at <= h.s[j].at {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
