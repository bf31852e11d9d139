package wait

import (
	"testing"
	"time"
)

// quietQueues returns waitQueues for client id whose subscriber never starts (no Redis, no
// goroutines): messages are handed to deliver by the test.
func quietQueues(id string) *Queues {
	r := NewQueues(nil, id, 0)
	r.subs.shut = true
	return r
}

func woken(w *Waiter) bool {
	select {
	case <-w.wake:
		return true
	default:
		return false
	}
}

// The slow mode of the hot-key wait tail: a woken waiter that found the lock taken again by this
// Client's own holder made every own release of the next second wake the next waiter through a
// 300µs timer, which a loaded host fires milliseconds late, while no other process contended. A
// Client alone on a lock must hand it on at once, whatever races its waiters lost.
func TestWaitQueues_ownRelease_wakesAtOnce_withoutOtherClients(t *testing.T) {
	r := quietQueues("c:me")
	const ch = "lockkit:{hot}:released"
	a, b := r.Join(ch, "ta", false), r.Join(ch, "tb", false)
	r.deliver(ch, "c:me")
	if !woken(a) {
		t.Fatal("the first release did not wake the head")
	}
	r.LostRace(a) // its attempt found the lock taken (by this Client's next holder)
	r.Requeue(a)
	r.deliver(ch, "c:me") // that holder's release
	if !woken(a) || woken(b) {
		t.Fatal("an own release after a lost race did not wake the head at once: no other client contends")
	}
}

// With another client releasing the lock too, a lost race still makes this Client yield after its
// own release (the alternation between processes stays).
func TestWaitQueues_ownRelease_yields_whenOtherClientsContend(t *testing.T) {
	r := quietQueues("c:me")
	r.yield = time.Second // (300 µs could pass before the check below on a loaded host)
	const ch = "lockkit:{hot}:released"
	a := r.Join(ch, "ta", false)
	r.deliver(ch, "c:other") // another process released: it contends for the lock
	if !woken(a) {
		t.Fatal("another client's release did not wake the head")
	}
	r.LostRace(a)
	r.Requeue(a)
	r.deliver(ch, "c:me")
	if woken(a) {
		t.Fatal("an own release woke the next waiter at once although other processes contend and it lost a race")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !woken(a) {
		if time.Now().After(deadline) {
			t.Fatal("the yielded wake-up never came")
		}
		time.Sleep(time.Millisecond)
	}
}
