package chaos_test

import (
	"testing"
	"time"
)

// The failover oracle on synthetic histories: the room without WithReplicaAck, none with it.

func TestSafetyOracle_failoverCases(t *testing.T) {
	// A failover: the master down at 100 ms, the replica promoted at 150 ms, both clients moved to it
	// at 200 ms (one at late, when given), a replica in sync at 400 ms.
	fo := func(promote, late time.Duration) failover {
		sw := []time.Duration{promote + 50*tms, promote + 50*tms}
		if late > 0 {
			sw[0] = late
		}
		return failover{Kind: "kill", From: promote - 50*tms, Down: promote - 50*tms, Promote: promote, Switch: sw, Synced: promote + 250*tms}
	}
	on := func(h hold, client int) hold { h.Client = client; return h }
	// A holds from 10 ms (TTL 1 s: renewal interval 333 ms) until live; B, another owner on client
	// 1, takes the name from the new master at 170 ms.
	a := func(live time.Duration) hold { return on(holder(1, "a", 0, 10*tms, live, 1), 0) }
	b := on(holder(2, "b", 160*tms, 170*tms, 500*tms, 2), 1)
	noAck, ack := []bool{false, false}, []bool{true, false}
	cases := []struct {
		name        string
		r           run
		fos         []failover
		acked       []bool
		bad, unsure string
	}{
		{name: "lost in a failover, taken by another owner, cancelled within a renewal interval of the switch",
			r: run{holds: []hold{a(450 * tms), b}}, fos: []failover{fo(150*tms, 0)}, acked: noAck},
		{name: "lost in a failover, live beyond a renewal interval after the switch",
			r: run{holds: []hold{a(900 * tms), b}}, fos: []failover{fo(150*tms, 0)}, acked: noAck, bad: "overlap"},
		{name: "taken WithReplicaAck: no room",
			r: run{holds: []hold{a(250 * tms), b}}, fos: []failover{fo(150*tms, 0)}, acked: ack, bad: "overlap"},
		{name: "the other owner's WithReplicaAck gives the holder none",
			r: run{holds: []hold{on(a(450*tms), 1), on(b, 0)}}, fos: []failover{fo(150*tms, 0)}, acked: ack},
		{name: "overlap before the failover",
			r:   run{holds: []hold{a(300 * tms), on(holder(2, "b", 60*tms, 70*tms, 90*tms, 2), 1)}},
			fos: []failover{fo(500*tms, 0)}, acked: noAck, bad: "overlap"},
		{name: "survived one failover, lost in the next: an owner between them overlaps",
			r:   run{holds: []hold{a(1700 * tms), on(holder(2, "b", 790*tms, 800*tms, 850*tms, 2), 1)}},
			fos: []failover{fo(150*tms, 0), fo(1500*tms, 0)}, acked: noAck, bad: "overlap"},
		{name: "a holder whose client learns of the switch late",
			r: run{holds: []hold{a(900 * tms), b}}, fos: []failover{fo(150*tms, 600*tms)}, acked: noAck},
		{name: "fences still increase across a failover",
			r:   run{holds: []hold{a(120 * tms), on(holder(2, "b", 160*tms, 170*tms, 500*tms, 0), 1)}},
			fos: []failover{fo(150*tms, 0)}, acked: noAck, bad: "fence"},
		{name: "permits: more holders than the limit after a failover, within the room",
			r:   run{holds: []hold{on(permitHold(1, "a", 1, 0, 10*tms, 450*tms, 1), 0), on(permitHold(2, "b", 1, 160*tms, 170*tms, 500*tms, 2), 1)}},
			fos: []failover{fo(150*tms, 0)}, acked: noAck},
		{name: "permits taken WithReplicaAck: over the limit",
			r:   run{holds: []hold{on(permitHold(1, "a", 1, 0, 10*tms, 450*tms, 1), 0), on(permitHold(2, "b", 1, 160*tms, 170*tms, 500*tms, 2), 1)}},
			fos: []failover{fo(150*tms, 0)}, acked: ack, bad: "over-limit"},
		{name: "Do's ErrLost across a failover is inconclusive",
			r: run{holds: []hold{func() hold {
				h := a(300 * tms)
				h.Kind, h.DoErr, h.DoLive, h.DoRet = "do", "lost", true, 310*tms
				return h
			}()}},
			fos: []failover{fo(150*tms, 0)}, acked: noAck, unsure: "do-lost"},
		{name: "a lease nobody holds, after a failover, is inconclusive",
			r: run{holds: []hold{on(permitHold(1, "a", 1, 0, 10*tms, 120*tms, 1), 0)},
				permits: []permitSnap{{Name: "n", From: 5 * time.Second, To: 5*time.Second + tms, Leases: []lease{{Tok: "a", Left: 900 * tms, Limit: 1}}}}},
			fos: []failover{fo(150*tms, 0)}, acked: ack, unsure: "orphan"},
		{name: "a lease nobody holds, long after any failover",
			r: run{holds: []hold{on(permitHold(1, "a", 1, 0, 10*tms, 120*tms, 1), 0)},
				permits: []permitSnap{{Name: "n", From: 9 * time.Second, To: 9*time.Second + tms, Leases: []lease{{Tok: "a", Left: 900 * tms, Limit: 1}}}}},
			fos: []failover{fo(150*tms, 0)}, acked: ack, bad: "orphan"},
		{name: "a context its caller cancelled before the loss was not live",
			r: run{holds: []hold{func() hold {
				h := a(900 * tms)
				h.End, h.Cause, h.LostAt, h.Why = 120*tms, "other:context canceled", 900*tms, "not_owner"
				return h
			}(), b}},
			fos: []failover{fo(150*tms, 0)}, acked: ack},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad, soft, _ := checkFailover(c.r, c.fos, c.acked)
			if got := props(bad); got != c.bad {
				t.Errorf("violations %q, want %q: %+v", got, c.bad, bad)
			}
			if got := props(soft); got != c.unsure {
				t.Errorf("inconclusive %q, want %q: %+v", got, c.unsure, soft)
			}
		})
	}
}
