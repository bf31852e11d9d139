package chaos_test

import (
	"strconv"
	"testing"
	"time"
)

// The observer oracle on synthetic histories.

func TestSafetyOracle_observeCases(t *testing.T) {
	// Terms 1..3 (fences 10, 20, 30; values v1..v3): each proclaimed at k·100 ms and resigned 50 ms
	// later; campaign "lost" never won.
	var holds []hold
	var cps []*campaign
	for k := 1; k <= 3; k++ {
		at := time.Duration(k) * 100 * tms
		h := holder(k, "t"+strconv.Itoa(k), at-5*tms, at, at+50*tms, int64(10*k))
		holds = append(holds, h)
		cps = append(cps, &campaign{Value: "v" + strconv.Itoa(k), Call: at - 5*tms, Hold: k, Resigned: at + 50*tms})
	}
	cps = append(cps, &campaign{Value: "lost", Call: 50 * tms})
	rep := func(at time.Duration, fence int64, value string) observerReport {
		return observerReport{Observer: 0, At: at, Fence: fence, Value: value}
	}
	begin, vac := rep(10*tms, 0, ""), func(at time.Duration) observerReport { return rep(at, 0, "") }
	all := []observerReport{begin, rep(105*tms, 10, "v1"), vac(155 * tms), rep(205*tms, 20, "v2"), vac(255 * tms),
		rep(305*tms, 30, "v3"), vac(400 * tms)}
	cases := []struct {
		name    string
		reps    []observerReport
		faults  []span
		every   bool
		bad     string
		skipped int
	}{
		{name: "every term in order, with vacancies", reps: all},
		{name: "every term in order, with vacancies, checked for the stronger promises", reps: all, every: true},
		{name: "an older term after a newer one, across a vacancy",
			reps: []observerReport{begin, rep(105*tms, 10, "v1"), rep(110*tms, 30, "v3"), vac(155 * tms), rep(160*tms, 20, "v2"), vac(400 * tms)},
			bad:  "observe-order"},
		{name: "a term again after a vacancy is not out of order",
			reps: []observerReport{begin, rep(105*tms, 10, "v1"), vac(155 * tms), rep(160*tms, 10, "v1"), rep(205*tms, 20, "v2"), rep(305*tms, 30, "v3"), vac(400 * tms)}},
		{name: "a vacancy while the term reported last was live, when vacancies must follow ends",
			reps:  []observerReport{begin, rep(105*tms, 10, "v1"), vac(120 * tms), rep(205*tms, 20, "v2"), rep(305*tms, 30, "v3"), vac(400 * tms)},
			every: true, bad: "observe-vacancy"},
		{name: "a vacancy while the term reported last was live, after its key was lost",
			reps:   []observerReport{begin, rep(105*tms, 10, "v1"), vac(120 * tms), rep(205*tms, 20, "v2"), rep(305*tms, 30, "v3"), vac(400 * tms)},
			faults: []span{{Kind: "del", Target: -1, From: 110 * tms, To: 111 * tms}},
			every:  true},
		{name: "a leader nobody campaigned as",
			reps: []observerReport{begin, rep(105*tms, 10, "v9"), vac(400 * tms)}, skipped: 2, bad: "observe-unknown"},
		{name: "a leader with another term's fence",
			reps: []observerReport{begin, rep(105*tms, 20, "v1"), vac(400 * tms)}, skipped: 2, bad: "observe-mismatch"},
		{name: "a failed campaign's announcement may be reported",
			reps: []observerReport{begin, rep(60*tms, 5, "lost"), rep(105*tms, 10, "v1"), rep(205*tms, 20, "v2"), rep(305*tms, 30, "v3"), vac(400 * tms)}},
		{name: "a skipped term is counted",
			reps: []observerReport{begin, rep(105*tms, 10, "v1"), rep(305*tms, 30, "v3"), vac(400 * tms)}, skipped: 1},
		{name: "a term skipped while the path was healthy, when every term must be reported",
			reps:  []observerReport{begin, rep(105*tms, 10, "v1"), rep(305*tms, 30, "v3"), vac(400 * tms)},
			every: true, skipped: 1, bad: "observe-skipped"},
		{name: "a term skipped while the path had a fault",
			reps:   []observerReport{begin, rep(105*tms, 10, "v1"), rep(305*tms, 30, "v3"), vac(400 * tms)},
			faults: []span{{Kind: "reset", Target: 0, From: 190 * tms, To: 220 * tms}},
			every:  true, skipped: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad, st := checkObserve(run{holds: holds, faults: c.faults}, cps, c.reps, []int{0, 1, 2, 3, 4, 5}, c.every, minObservedTerm)
			if got := props(bad); got != c.bad {
				t.Errorf("violations %q, want %q: %+v", got, c.bad, bad)
			}
			if st.skipped[0] != c.skipped {
				t.Errorf("skipped %d, want %d (%s)", st.skipped[0], c.skipped, st)
			}
		})
	}
}
