package wait

import (
	"strconv"
	"strings"
	"testing"
)

// A fair or permit waiter joins before the server told it its token's digest: a grant or a turn
// that names it meanwhile is kept and handed to it once it is named; messages for other processes'
// waiters are dropped then, and nothing is kept while no waiter is unnamed.
func TestWaitQueues_unnamedWaiter_getsWhatNamedItMeanwhile(t *testing.T) {
	r := quietQueues("c:me")
	const ch = "lockkit:{fair}:released"
	dA, dB, dOther := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)

	a := r.Join(ch, "", true)
	r.deliver(ch, "g:"+dOther+":7:100") // another process's waiter
	r.deliver(ch, "g:"+dA+":8:101")     // a's grant, before a knows its digest
	if woken(a) {
		t.Fatal("an unnamed waiter was woken by a grant")
	}
	r.Named(a, dA)
	if !woken(a) {
		t.Fatal("the grant kept for the waiter did not wake it once named")
	}
	if g := r.TakeGrant(a); !g.OK || g.Fence != 8 || g.Epoch != 101 {
		t.Fatalf("grant = %+v, want fence 8 epoch 101", g)
	}

	b := r.Join(ch, "", true)
	r.deliver(ch, dB) // b's turn (a fair release), before b knows its digest
	r.Named(b, dB)
	if !woken(b) {
		t.Fatal("the turn kept for the waiter did not wake it once named")
	}
	if q := r.queues[ch]; q.unnamed != 0 || q.unclaimed != nil {
		t.Fatalf("after naming: %d unnamed, kept %v", q.unnamed, q.unclaimed)
	}
	r.deliver(ch, "g:"+dOther+":9:102")
	if q := r.queues[ch]; q.unclaimed != nil {
		t.Fatalf("kept %v with no unnamed waiter", q.unclaimed)
	}

	c := r.Join(ch, "", true)
	for i := range maxUnclaimed + 5 {
		r.deliver(ch, "g:"+dOther+":"+strconv.Itoa(i+1)+":1")
	}
	if q := r.queues[ch]; len(q.unclaimed) != maxUnclaimed {
		t.Fatalf("kept %d messages, want at most %d", len(q.unclaimed), maxUnclaimed)
	}
	r.Leave(c, false)
	if q := r.queues[ch]; q.unnamed != 0 || q.unclaimed != nil {
		t.Fatalf("after the unnamed waiter left: %d unnamed, kept %d", q.unnamed, len(q.unclaimed))
	}
	r.Leave(a, true)
	r.Leave(b, true)
}
