package store

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
)

// keySlot is Redis Cluster's HASH_SLOT (the cluster specification's examples).
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]uint16{
		"foo": 12182, "bar": 5061, "somekey": 11058, "foo{hash_tag}": 2515, "somethingelse{hash_tag}": 2515,
		"{user1000}.following": Slot("user1000"), "foo{}{bar}": Slot("foo{}{bar}"), "foo{{bar}}zap": Slot("{bar"),
		"foo{bar}{zap}": Slot("bar"), "": 0,
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if Slot("foo{}{bar}") == Slot("bar") {
		t.Error("an empty hash tag is no tag: the whole key hashes")
	}
}

// On a cluster a renew_many.lua call carries the locks of one slot only: names that share a slot
// go together, the others alone (renew_many.lua with one key), and every one is renewed; under WithReplicaAck too
// (one connection and WAIT per master).
func TestRenew_clusterBatchesBySlot(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb := cl.Client(t)
	n := NewNode(rdb, "c:test", &Config{})
	n.Fenced = true
	ctx := context.Background()
	// Names of one slot: the first few that share "a"'s.
	names := []string{"a"}
	for i := 0; len(names) < 4; i++ {
		if nm := "s" + strconv.Itoa(i); Slot(nm) == Slot("a") {
			names = append(names, nm)
		}
	}
	for i := range 6 {
		names = append(names, "lone"+strconv.Itoa(i))
	}
	var items []RenewItem
	for i, nm := range names {
		k := &Keys{}
		k.Init("lockkit:", nm)
		tok := "tok" + strconv.Itoa(i)
		res, err := n.Acquire(ctx, &AcquireReq{Keys: k, Token: tok, Hold: "0", TTL: time.Second})
		if err != nil || !res.OK {
			t.Fatalf("acquire %s: %+v %v", nm, res, err)
		}
		k.Held(res.Fence)
		items = append(items, RenewItem{K: k, Token: tok, TTL: 20 * time.Second})
	}
	b := &renewBufs{}
	n.renewPlan(b, items)
	many := 0
	for _, s := range b.sends {
		slot := Slot(items[b.order[s.lo]].K.Main)
		for _, i := range b.order[s.lo:s.hi] {
			if Slot(items[i].K.Main) != slot {
				t.Errorf("a call mixes slots: %v", b.order[s.lo:s.hi])
			}
		}
		if s.many {
			many += s.hi - s.lo
		}
	}
	if many < 4 {
		t.Errorf("%d locks in renew_many.lua calls, want at least the 4 of one slot", many)
	}
	acked := NewNode(rdb, "c:test", &Config{Replicas: 1, ReplicaWait: 2 * time.Second})
	acked.Fenced = true
	for _, node := range []*Node{n, acked} {
		for i := range items {
			items[i].OK, items[i].Err, items[i].TTL = false, nil, items[i].TTL+10*time.Second
		}
		if err := node.Renew(ctx, items); err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if !it.OK || it.Err != nil {
				t.Errorf("%s (acked %v): %v %v", it.K.Main, node == acked, it.OK, it.Err)
			} else if d := rdb.PTTL(ctx, it.K.Main).Val(); d < it.TTL-5*time.Second {
				t.Errorf("%s (acked %v): PTTL %v after a %v renewal", it.K.Main, node == acked, d, it.TTL)
			}
		}
	}
}
