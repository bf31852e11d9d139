package chaos_test

import (
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
)

// The mixed-kinds oracle (checkRW on holds with a Mode) on synthetic histories with key losses: a
// loss excuses, and ends, the holds of the family whose keys it deleted (oracle.losses, family);
// the name's lock key, which holds the marks, counts for every family; a set's holds are locks.

func TestSafetyOracle_mixedLossCases(t *testing.T) {
	// Hold 1 (TTL 1 s: renewal interval 333 ms) from 10 ms; the loss comes at 500 ms, so hold 1 must
	// be gone by about 843 ms (see TestSafetyOracle_lossCases); hold 2 is granted at 560 ms.
	moded := func(h hold, mode string, limit int) hold { h.Mode, h.Limit = mode, limit; return h }
	read := func(live time.Duration) hold {
		return moded(holder(1, "a", 0, 10*tms, live, 1), "read", core.MaxPermits)
	}
	permit := func(live time.Duration) hold { return moded(holder(1, "a", 0, 10*tms, live, 1), "permit", 2) }
	lock := moded(holder(2, "b", 550*tms, 560*tms, 2*time.Second, 2), "lock", 1)
	set := holder(2, "b", 550*tms, 560*tms, 2*time.Second, 2)
	set.Kind = "set" // (mixedRun makes it a lock)
	del := func(keys string) span {
		return span{Kind: "del", Target: -1, Name: "n", Keys: keys, From: 500 * tms, To: 501 * tms}
	}
	force := span{Kind: "force", Target: -1, Name: "n", From: 500 * tms, To: 501 * tms}
	cases := []struct {
		name string
		r    run
		bad  string
	}{
		{name: "a DEL of the lock key (the marks) frees a read that ends within its bound",
			r: run{holds: []hold{read(830 * tms), lock}, faults: []span{del("lock")}}},
		{name: "a read that outlives its bound after a DEL of the lock key",
			r: run{holds: []hold{read(1200 * tms), lock}, faults: []span{del("lock")}}, bad: "over-limit,loss-late"},
		{name: "a DEL of the read-write leases frees a read",
			r: run{holds: []hold{read(830 * tms), lock}, faults: []span{del("rw")}}},
		{name: "a DEL of the permits' leases does not free a read",
			r: run{holds: []hold{read(830 * tms), lock}, faults: []span{del("permits")}}, bad: "over-limit"},
		{name: "a DEL of the permits' leases is no loss of a read",
			r: run{holds: []hold{read(1200 * tms)}, faults: []span{del("permits")}}},
		{name: "a DEL of the read-write leases is no loss of a permit",
			r: run{holds: []hold{permit(1200 * tms)}, faults: []span{del("rw")}}},
		{name: "a DEL of the permits' leases is a loss of a permit",
			r: run{holds: []hold{permit(1200 * tms)}, faults: []span{del("permits")}}, bad: "loss-late"},
		{name: "a set's lock beside a permit",
			r: run{holds: []hold{permit(1200 * tms), set}}, bad: "over-limit"},
		{name: "a set's lock after a ForceRelease that the permit hears of in time",
			r: run{holds: []hold{permit(830 * tms), set}, faults: []span{force}}},
		{name: "a set's lock after a ForceRelease that the permit outlives",
			r: run{holds: []hold{permit(1200 * tms), set}, faults: []span{force}}, bad: "over-limit,loss-late"},
	}
	for _, c := range cases {
		mixedRun(&c.r)
		bad, _ := checkRW(c.r, nil, nil)
		if props(bad) != c.bad {
			t.Errorf("%s: violations [%s]; want [%s]", c.name, props(bad), c.bad)
			for _, v := range bad {
				t.Logf("  %s", v.Msg)
			}
		}
	}
}
