package core

import (
	"strings"
	"testing"

	"github.com/lockkit/lockkit/core/internal/store"
)

// A lock's names cost one allocation, also for a name too long for the compiler's stack buffer
// of a concatenation, and are what docs/keys.md says.
func TestKeys_init_oneAllocation(t *testing.T) {
	name := strings.Repeat("n", 40)
	var k store.Keys
	if n := testing.AllocsPerRun(100, func() { k.Init("lockkit:", name) }); n != 1 {
		t.Fatalf("keys.init allocates %v times, want 1", n)
	}
	main := "lockkit:{" + name + "}"
	if k.Name != name || k.Main != main || k.Channel != main+":released" || k.Queue != main+":queue" ||
		k.Deadlines != main+":queue:deadlines" {
		t.Fatalf("keys %+v", k)
	}
	var p store.Keys
	p.InitSem("p:", "x", 3)
	if p.Main != "p:{x}:permits" || p.Channel != p.Main+":released" || p.Queue != p.Main+":queue" ||
		p.Deadlines != p.Main+":queue:deadlines" {
		t.Fatalf("semaphore keys %+v", p)
	}
}

// A release that succeeded costs finish nothing (errors.As's target escapes to the heap: it is
// asked only about a failed release).
func TestLock_finish_successAllocatesNothing(t *testing.T) {
	l := &Lock{c: &Client{}}
	if n := testing.AllocsPerRun(100, func() {
		if err := l.finish(stateReleased, true, 0, nil); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("finish of a successful release allocates %v times, want 0", n)
	}
}
