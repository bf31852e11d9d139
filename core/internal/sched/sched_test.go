package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

type item struct {
	place int
	at    time.Duration
}

func (it *item) Place() *int { return &it.place }

// TestHeap_randomOperations checks the heap against a sorted model over random sets, moves and
// removals: Min is always the earliest item and every place is right.
func TestHeap_randomOperations(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		var h Heap[*item]
		var in []*item
		for op := 0; op < 2000; op++ {
			switch r := rng.IntN(10); {
			case r < 5 || len(in) == 0: // insert
				it := &item{place: -1, at: time.Duration(rng.IntN(1000))}
				h.Set(it, it.at)
				in = append(in, it)
			case r < 8: // move
				it := in[rng.IntN(len(in))]
				it.at = time.Duration(rng.IntN(1000))
				h.Set(it, it.at)
			default: // remove
				k := rng.IntN(len(in))
				h.Remove(in[k])
				if in[k].place != -1 {
					t.Fatalf("seed %d: removed item keeps place %d", seed, in[k].place)
				}
				in = slices.Delete(in, k, k+1)
			}
			if h.Len() != len(in) {
				t.Fatalf("seed %d: Len %d, want %d", seed, h.Len(), len(in))
			}
			for i, s := range h.s {
				if s.it.place != i || s.at != s.it.at {
					t.Fatalf("seed %d: slot %d holds place %d, at %v (item's %v)", seed, i, s.it.place, s.at, s.it.at)
				}
			}
			if len(in) > 0 {
				earliest := slices.MinFunc(in, func(a, b *item) int { return int(a.at - b.at) })
				if h.Min().at != earliest.at {
					t.Fatalf("seed %d: Min due %v, want %v", seed, h.Min().at, earliest.at)
				}
			}
		}
	}
}

// BenchmarkHeap_set moves items of a 100,000-item heap, as renewals do.
func BenchmarkHeap_set(b *testing.B) {
	var h Heap[*item]
	items := make([]*item, 100000)
	for i := range items {
		items[i] = &item{place: -1}
		h.Set(items[i], time.Duration(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		it := h.Min()
		h.Set(it, time.Duration(100000+i))
	}
}
