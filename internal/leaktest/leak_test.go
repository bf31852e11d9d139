package leaktest

import (
	"strings"
	"testing"
	"time"
)

// The check finds a goroutine started after the snapshot that is still blocked, names its stack,
// and passes once that goroutine has ended (while it waits, not only at the first look).
func TestLeaked_finds_a_running_goroutine_until_it_ends(t *testing.T) {
	before := goroutines()
	stop := make(chan struct{})
	done := make(chan struct{})
	go parkedForLeakTest(stop, done)

	stacks := leaked(before, 50*time.Millisecond)
	if !strings.Contains(stacks, "parkedForLeakTest") {
		t.Fatalf("leaked goroutines:\n%s\nwant the parked goroutine", stacks)
	}

	time.AfterFunc(100*time.Millisecond, func() { close(stop) }) // ends while leaked polls
	if stacks := leaked(before, 10*time.Second); stacks != "" {
		t.Fatalf("after the goroutine ended:\n%s", stacks)
	}
	<-done
}

// Goroutines that were running at the snapshot are not counted.
func TestLeaked_ignores_goroutines_from_before(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go parkedForLeakTest(stop, done)
	defer func() { close(stop); <-done }()

	before := goroutines()
	if stacks := leaked(before, 0); stacks != "" {
		t.Fatalf("leaked goroutines:\n%s\nwant none", stacks)
	}
}

func parkedForLeakTest(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	<-stop
}
