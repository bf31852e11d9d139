package core

import (
	"strings"
	"testing"
)

// A lock's names cost one allocation, also for a name too long for the compiler's stack buffer
// of a concatenation, and are what docs/keys.md says.
func TestKeys_init_oneAllocation(t *testing.T) {
	name := strings.Repeat("n", 40)
	var k keys
	if n := testing.AllocsPerRun(100, func() { k.init("lockkit:", name) }); n != 1 {
		t.Fatalf("keys.init allocates %v times, want 1", n)
	}
	main := "lockkit:{" + name + "}"
	if k.name != name || k.main != main || k.channel != main+":released" || k.queue != main+":queue" ||
		k.dls != main+":queue:deadlines" {
		t.Fatalf("keys %+v", k)
	}
	var p keys
	p.initSem("p:", "x", 3)
	if p.main != "p:{x}:permits" || p.channel != p.main+":released" || p.queue != p.main+":queue" ||
		p.dls != p.main+":queue:deadlines" {
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
