package core

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The watchdog's typed heap (watchdog_entry.go) keeps its order and every entry's index through
// random pushes, moves and removals.
func TestEntryHeap_randomOperations(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var h entryHeap
	var live []*entry
	check := func(step int) {
		t.Helper()
		for i, s := range h {
			if s.e.idx != i {
				t.Fatalf("step %d: slot %d holds an entry that says %d", step, i, s.e.idx)
			}
			if i > 0 && h[(i-1)/2].at > s.at {
				t.Fatalf("step %d: slot %d is due before its parent", step, i)
			}
		}
	}
	for step := range 5000 {
		switch op := rnd.IntN(3); {
		case op == 0 || len(live) == 0:
			e := &entry{idx: len(h)}
			h = append(h, heapSlot{at: time.Duration(rnd.IntN(1000)), e: e})
			h.up(e.idx)
			live = append(live, e)
		case op == 1:
			e := live[rnd.IntN(len(live))]
			h[e.idx].at = time.Duration(rnd.IntN(1000))
			h.fixAt(e.idx)
		default:
			i := rnd.IntN(len(live))
			e := live[i]
			h.remove(e.idx)
			if e.idx != -1 {
				t.Fatalf("step %d: a removed entry says %d", step, e.idx)
			}
			live = slices.Delete(live, i, i+1)
		}
		check(step)
	}
}
