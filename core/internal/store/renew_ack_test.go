package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
)

// Under WithReplicaAck a batch goes over the master's own connection and counts only once the
// replica acknowledged it: renewed and acknowledged locks are OK (and renewed on the replica too),
// a lock not the token's fails alone, and with the replica stalled every renewal that wrote fails
// with an *AckError.
func TestRenew_batchReplicaAck(t *testing.T) {
	srvs := redistest.StartN(t, 2)
	master, replica := srvs[0], srvs[1]
	replica.Do(t, "REPLICAOF", "127.0.0.1", strconv.Itoa(master.Port()))
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, _ := replica.Do(t, "INFO", "replication").(string)
		minfo, _ := master.Do(t, "INFO", "replication").(string)
		if strings.Contains(info, "master_link_status:up") && strings.Contains(minfo, "state=online") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica never got in sync")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rdb := master.Client(t)
	plain := NewNode(rdb, "c:test", &Config{})
	plain.Fenced = true
	// WAIT returns as soon as the replica acknowledges, so the healthy phase can afford a long
	// timeout (a loaded CI host once took longer than 300 ms); the stalled phase uses a short one.
	n := NewNode(rdb, "c:test", &Config{Replicas: 1, ReplicaWait: 10 * time.Second, RenewChunk: 3})
	n.Fenced = true
	stalled := NewNode(rdb, "c:test", &Config{Replicas: 1, ReplicaWait: 300 * time.Millisecond, RenewChunk: 3})
	stalled.Fenced = true
	r := &renewRig{t: t, srv: master, rdb: rdb, n: plain} // takes the locks without waiting
	ctx := context.Background()
	var items []RenewItem
	for i := range 5 {
		tok := "tok" + strconv.Itoa(i)
		items = append(items, RenewItem{K: r.take("a"+strconv.Itoa(i), tok, time.Second), Token: tok, TTL: 20 * time.Second})
	}
	other := r.take("other", "someone", time.Second)
	items = append(items[:2], append([]RenewItem{{K: other, Token: "mine", TTL: 20 * time.Second}}, items[2:]...)...)
	if err := n.Renew(ctx, items); err != nil {
		t.Fatal(err)
	}
	rrdb := replica.Client(t)
	for i, it := range items {
		want := i != 2
		if it.OK != want || it.Err != nil {
			t.Errorf("%s: ok %v err %v, want ok %v", it.K.Main, it.OK, it.Err, want)
		}
		if d := rrdb.PTTL(ctx, it.K.Main).Val(); want && d < 15*time.Second {
			t.Errorf("%s: PTTL %v on the replica after an acknowledged 20 s renewal", it.K.Main, d)
		} else if !want && d > time.Second {
			t.Errorf("another owner's lock: PTTL %v on the replica, renewed", d)
		}
	}

	replica.Pause(t)
	defer replica.Resume(t)
	for i := range items {
		items[i].OK, items[i].Err, items[i].TTL = false, nil, 30*time.Second
	}
	if err := stalled.Renew(ctx, items); err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		var ack *AckError
		if i == 2 {
			if it.OK || it.Err != nil {
				t.Errorf("another owner's lock with the replica stalled: ok %v err %v, want a failed owner check", it.OK, it.Err)
			}
		} else if it.OK || !errors.As(it.Err, &ack) {
			t.Errorf("%s with the replica stalled: ok %v err %v, want an *AckError", it.K.Main, it.OK, it.Err)
		}
	}
}
