package chaos_test

import (
	"testing"
	"time"
)

// The semaphore oracle on synthetic histories: it must flag each kind of violation, and must not
// flag the close but sound cases.

// permitHold returns a permit of name n with the given limit (see holder).
func permitHold(id int, tok string, limit int, sent, ret, live time.Duration, fence int64) hold {
	h := holder(id, tok, sent, ret, live, fence)
	h.Limit = limit
	return h
}

func TestSafetyOracle_permitCases(t *testing.T) {
	p := permitHold
	snap := func(from time.Duration, leases ...lease) permitSnap {
		return permitSnap{Name: "n", From: from, To: from + tms, Leases: leases}
	}
	cases := []struct {
		name        string
		r           run
		bad, unsure string
	}{
		{name: "two holders of two permits",
			r: run{holds: []hold{p(1, "a", 2, 0, 10*tms, 100*tms, 1), p(2, "b", 2, 20*tms, 30*tms, 100*tms, 2)}}},
		{name: "three holders of two permits",
			r: run{holds: []hold{p(1, "a", 2, 0, 10*tms, 100*tms, 1), p(2, "b", 2, 0, 10*tms, 100*tms, 2),
				p(3, "c", 2, 20*tms, 30*tms, 100*tms, 3)}},
			bad: "over-limit"},
		{name: "third permit granted after one was released",
			r: run{holds: []hold{p(1, "a", 2, 0, 10*tms, 25*tms, 1), p(2, "b", 2, 0, 10*tms, 100*tms, 2),
				p(3, "c", 2, 20*tms, 30*tms, 100*tms, 3)}}},
		{name: "three concurrent acquisitions: no order among them",
			r: run{holds: []hold{p(1, "a", 2, 0, 10*tms, 100*tms, 1), p(2, "b", 2, 5*tms, 30*tms, 100*tms, 2),
				p(3, "c", 2, 20*tms, 30*tms, 100*tms, 3)}}},
		{name: "a holder with a lower limit",
			r:   run{holds: []hold{p(1, "a", 1, 0, 10*tms, 100*tms, 1), p(2, "b", 3, 20*tms, 30*tms, 100*tms, 2)}},
			bad: "over-limit"},
		{name: "over the limit within the timer lateness",
			r: run{holds: []hold{p(1, "a", 1, 0, 10*tms, 40*tms, 1), p(2, "b", 1, 20*tms, 30*tms, 100*tms, 2)},
				late: []span{{From: 0, To: 50 * tms, Target: 20_000}}},
			unsure: "over-limit"},
		{name: "fence inversion",
			r:   run{holds: []hold{p(1, "a", 2, 0, 10*tms, 15*tms, 5), p(2, "b", 2, 20*tms, 30*tms, 40*tms, 4)}},
			bad: "fence"},
		{name: "same fence twice",
			r:   run{holds: []hold{p(1, "a", 2, 0, 10*tms, 100*tms, 5), p(2, "b", 2, 5*tms, 30*tms, 40*tms, 5)}},
			bad: "fence"},
		{name: "Redis over the limit",
			r:   run{permits: []permitSnap{snap(50*tms, lease{"a", tms, 2}, lease{"b", tms, 3}, lease{"c", tms, 3})}},
			bad: "lease-count"},
		{name: "Redis at the limit",
			r: run{permits: []permitSnap{snap(50*tms, lease{"a", tms, 3}, lease{"b", tms, 3}, lease{"c", tms, 3})}}},
		{name: "live holder without a lease",
			r:   run{holds: []hold{p(1, "a", 2, 0, 10*tms, 100*tms, 1)}, permits: []permitSnap{snap(50*tms, lease{"b", tms, 2})}},
			bad: "lease-gone"},
		{name: "holder released before the read",
			r: run{holds: []hold{p(1, "a", 2, 0, 10*tms, 50*tms, 1)}, permits: []permitSnap{snap(50 * tms)}}},
		{name: "lease outlives its ended holder by more than its TTL",
			r: run{holds: []hold{p(1, "a", 2, 0, 10*tms, 50*tms, 1)},
				permits: []permitSnap{snap(4*time.Second, lease{"a", 500 * tms, 2})}},
			bad: "orphan"},
		{name: "lease of a released holder within its TTL",
			r: run{holds: []hold{p(1, "a", 2, 0, 10*tms, 50*tms, 1)},
				permits: []permitSnap{snap(900*tms, lease{"a", 100 * tms, 2})}}},
		{name: "lease of a failed acquisition past its TTL",
			r: run{fails: []failed{{Client: 0, Name: "n", Tok: "x", TTL: time.Second, Limit: 2, Call: 100 * tms, Ret: 200 * tms}},
				permits: []permitSnap{snap(3*time.Second, lease{"x", 500 * tms, 2})}},
			bad: "orphan"},
	}
	for _, c := range cases {
		bad, unsure := checkPermits(c.r)
		if props(bad) != c.bad || props(unsure) != c.unsure {
			t.Errorf("%s: violations [%s], inconclusive [%s]; want [%s], [%s]", c.name, props(bad), props(unsure), c.bad, c.unsure)
			for _, v := range append(bad, unsure...) {
				t.Logf("  %s", v.Msg)
			}
		}
	}
}
