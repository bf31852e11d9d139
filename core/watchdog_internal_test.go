package core

import (
	"testing"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// A renewal reply that lands after Extend changed the TTL (defect 2 of issue #16) cannot lengthen
// the validity beyond what the new TTL allows, nor move the renewal Extend scheduled.
func TestWatchdog_staleRenewalReply_cannotOutlastExtend(t *testing.T) {
	opt, _ := buildOptions(nil)
	w := newWatchdog(&Client{opt: opt})
	sent := time.Now()
	e := &entry{ttl: 6 * time.Second, idx: -1}
	it := store.RenewItem{TTL: e.ttl, Seq: e.seq} // in flight with the old TTL
	w.extended(e, sent.Add(time.Millisecond), 300*time.Millisecond)
	valid, next := e.valid, e.next
	w.renewed(e, &it, sent)
	if e.valid.After(sent.Add(300 * time.Millisecond)) {
		t.Fatalf("a stale reply made the lock valid for %v, Extend asked for 300ms", e.valid.Sub(sent))
	}
	if !e.valid.Equal(valid) || !e.next.Equal(next) {
		t.Fatalf("stale reply moved validity %v→%v or next renewal %v→%v", valid, e.valid, next, e.next)
	}
	fresh := store.RenewItem{TTL: e.ttl, Seq: e.seq}
	later := sent.Add(100 * time.Millisecond)
	w.renewed(e, &fresh, later)
	if want := later.Add(300*time.Millisecond - w.c.opt.drift(300*time.Millisecond)); !e.valid.Equal(want) {
		t.Fatalf("a current reply set validity %v, want %v", e.valid, want)
	}
}
