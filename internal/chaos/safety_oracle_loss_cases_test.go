package chaos_test

import (
	"testing"
	"time"
)

// The oracle's checks of key losses and of WithMaxHold on synthetic histories: each must flag what
// a correct lock cannot do and let pass what the docs allow (a holder works on until its next
// renewal shows the loss; a hold ends at its limit plus the timer's lateness).

func TestSafetyOracle_lossCases(t *testing.T) {
	// A holds n (TTL 1 s: renewal interval 333 ms) from 10 ms; the loss comes at 500 ms, so A must
	// be gone by about 501 + 333 + 2 × 2 (round trips: commands under 2 ms are not recorded) + 5 ms
	// (slack) = 843 ms.
	a := func(live time.Duration) hold { return holder(1, "a", 0, 10*tms, live, 1) }
	loss := func(kind string, at time.Duration) span {
		return span{Kind: kind, Target: -1, Name: "n", Keys: "lock", From: at, To: at + tms}
	}
	force := loss("force", 500*tms)
	force.Keys = ""
	other := force
	other.Name = "m"
	unsure := force
	unsure.Unsure = true
	b := holder(2, "b", 550*tms, 560*tms, 2*time.Second, 2)
	ctxReentry := func(holds int64, fence int64) hold {
		return hold{ID: 3, Client: 0, Name: "n", Tok: "a", Kind: "ctx", Outer: 1, TTL: 100 * tms, Call: 600 * tms, Sent: 600 * tms,
			Ret: 601 * tms, Live: 650 * tms, End: 651 * tms, Cause: "released", Fence: fence, Holds: holds}
	}
	latency := span{Kind: "latency", Target: 0, From: 400 * tms, To: 900 * tms}
	cases := []struct {
		name        string
		r           run
		bad, unsure string
	}{
		{name: "holder ends within a renewal interval of the force release",
			r: run{holds: []hold{a(830 * tms)}, faults: []span{force}}},
		{name: "holder outlives the bound after a force release",
			r: run{holds: []hold{a(1200 * tms)}, faults: []span{force}}, bad: "loss-late"},
		{name: "holder outlives the bound after a DEL",
			r: run{holds: []hold{a(1200 * tms)}, faults: []span{loss("del", 500*tms)}}, bad: "loss-late"},
		{name: "a loss of another name",
			r: run{holds: []hold{a(1200 * tms)}, faults: []span{other}}},
		{name: "a force release that may not have run",
			r: run{holds: []hold{a(1200 * tms)}, faults: []span{unsure}}},
		{name: "DEL of a semaphore's keys leaves the lock",
			r: run{holds: []hold{a(1200 * tms)}, faults: []span{func() span { s := loss("del", 500*tms); s.Keys = "permits"; return s }()}}},
		{name: "delayed replies: the validity deadline bounds it",
			r: run{holds: []hold{a(1400 * tms)}, faults: []span{force, latency}}},
		{name: "delayed replies: past the validity deadline",
			r: run{holds: []hold{a(1600 * tms)}, faults: []span{force, latency}}, bad: "loss-late"},
		{name: "slow commands lengthen the bound",
			r: run{holds: []hold{a(980 * tms)}, faults: []span{force}, slow: []span{{Kind: "slow", Target: 0, From: 820 * tms, To: 900 * tms}}}},
		{name: "a FLUSHALL hits every name",
			r: run{holds: []hold{a(1200 * tms)}, faults: []span{{Kind: "flushall", Target: -1, From: 500 * tms, To: 501 * tms}}}, bad: "loss-late"},
		{name: "a hold acquired after the loss",
			r: run{holds: []hold{holder(1, "a", 495*tms, 505*tms, 1500*tms, 1)}, faults: []span{force}}},
		{name: "another owner takes it after a force release, the holder ends in time",
			r: run{holds: []hold{a(830 * tms), b}, faults: []span{force}}},
		{name: "another owner takes it after a force release, the holder lives on",
			r: run{holds: []hold{a(1200 * tms), b}, faults: []span{force}}, bad: "overlap,loss-late"},
		{name: "a re-entry after a force release takes the lock afresh",
			r: run{holds: []hold{a(830 * tms), ctxReentry(1, 2)}, faults: []span{force}}, bad: "reentry-after-loss"},
		{name: "a re-entry after a force release re-enters another acquisition",
			r: run{holds: []hold{a(830 * tms), ctxReentry(2, 2)}, faults: []span{force}}, bad: "reentry-fence"},
		{name: "a re-entry before the loss",
			r: run{holds: []hold{a(830 * tms), ctxReentry(2, 1)}, faults: []span{loss("force", 700*tms)}}},
		{name: "a re-entry takes the lock afresh without a loss",
			r: run{holds: []hold{a(830 * tms), ctxReentry(1, 2)}}, bad: "reentry-not-held"},
		{name: "loss reported after a force release of its name",
			r: run{holds: []hold{func() hold {
				h := a(0)
				h.LostAt, h.Why, h.Live, h.End, h.Cause = 800*tms, "not_owner", 800*tms, 801*tms, "lost:not_owner"
				return h
			}()}, faults: []span{force}}},
		{name: "loss reported after a force release of another name",
			r: run{holds: []hold{func() hold {
				h := a(0)
				h.LostAt, h.Why, h.Live, h.End, h.Cause = 1300*tms, "not_owner", 1300*tms, 1301*tms, "lost:not_owner"
				return h
			}()}, faults: []span{other}}, bad: "loss-while-healthy"},
		{name: "Do's release finds the lock force-released",
			r: run{holds: []hold{func() hold {
				h := a(450 * tms)
				h.Kind, h.DoErr, h.DoLive, h.DoRet = "do", "lost", true, 520*tms
				return h
			}()}, faults: []span{force}}},
		{name: "fences from the clock floor right after a DEL",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 10*tms, 5), holder(2, "b", 20*tms, 30*tms, 40*tms, 4)},
				faults: []span{loss("del", 10*tms+500*time.Microsecond)}}},
		{name: "fences not above after a DEL well after the acquisition",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 10*tms, 5), holder(2, "b", 20*tms, 30*tms, 40*tms, 4)},
				faults: []span{loss("del", 15*tms)}}, bad: "fence"},
		{name: "a force release keeps the fence",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 10*tms, 5), holder(2, "b", 20*tms, 30*tms, 40*tms, 4)},
				faults: []span{loss("force", 10*tms+500*time.Microsecond)}}, bad: "fence"},
	}
	for _, c := range cases {
		bad, unsure := check(c.r)
		if props(bad) != c.bad || props(unsure) != c.unsure {
			t.Errorf("%s: violations [%s], inconclusive [%s]; want [%s], [%s]", c.name, props(bad), props(unsure), c.bad, c.unsure)
			for _, v := range append(bad, unsure...) {
				t.Logf("  %s", v.Msg)
			}
		}
	}
}

func TestSafetyOracle_maxHoldCases(t *testing.T) {
	limited := func(maxHold, end time.Duration, cause string) hold {
		h := holder(1, "a", 0, 10*tms, end-tms, 1)
		h.MaxHold, h.End, h.Cause = maxHold, end, cause
		return h
	}
	released := func(h hold, heldSeen time.Duration) hold { h.HeldSeen = heldSeen; return h }
	cases := []struct {
		name string
		r    run
		bad  string
	}{
		{name: "ended at its limit", r: run{holds: []hold{limited(200*tms, 215*tms, "maxhold")}}},
		{name: "released before its limit", r: run{holds: []hold{limited(200*tms, 100*tms, "released")}}},
		{name: "ended late", r: run{holds: []hold{limited(200*tms, 300*tms, "maxhold")}}, bad: "maxhold-late"},
		{name: "lived on past its limit", r: run{holds: []hold{limited(200*tms, 900*tms, "released")}}, bad: "maxhold-late"},
		{name: "late within the timer lateness",
			r: run{holds: []hold{limited(200*tms, 300*tms, "maxhold")}, late: []span{{From: 200 * tms, To: 300 * tms, Target: 50_000}}}},
		{name: "late while goroutines waited to run",
			r: run{holds: []hold{limited(200*tms, 300*tms, "maxhold")}, sched: []span{{From: 200 * tms, To: 300 * tms, Target: 50_000}}}},
		{name: "ended before its limit", r: run{holds: []hold{limited(200*tms, 150*tms, "maxhold")}}, bad: "maxhold-early"},
		{name: "ended by a limit it did not have", r: run{holds: []hold{limited(0, 150*tms, "maxhold")}}, bad: "maxhold-early"},
		{name: "a re-entry ends with the hold it entered",
			r: run{holds: []hold{limited(200*tms, 212*tms, "maxhold"),
				{ID: 2, Name: "n", Tok: "a", Kind: "ctx", Outer: 1, TTL: time.Second, Call: 100 * tms, Sent: 100 * tms, Ret: 101 * tms,
					Live: 150 * tms, End: 213 * tms, Cause: "maxhold", Fence: 1, Holds: 2}}}},
		{name: "freed soon after the end", r: run{holds: []hold{released(limited(200*tms, 210*tms, "maxhold"), 300*tms)}}},
		{name: "still held in Redis long after the end",
			r: run{holds: []hold{released(limited(200*tms, 210*tms, "maxhold"), 800*tms)}}, bad: "maxhold-not-released"},
		{name: "still held after a fault on its path",
			r: run{holds: []hold{released(limited(200*tms, 210*tms, "maxhold"), 800*tms)},
				faults: []span{{Kind: "pause", Target: -1, From: 5 * tms, To: 50 * tms}}}},
		{name: "still held by a co-owner on another client",
			r: run{holds: []hold{released(limited(200*tms, 210*tms, "maxhold"), 800*tms),
				{ID: 2, Client: 1, Name: "n", Tok: "a", Kind: "owner", Outer: 1, TTL: time.Second, Call: 100 * tms, Sent: 100 * tms, Ret: 101 * tms,
					Live: 850 * tms, End: 851 * tms, Cause: "released", Fence: 1, Holds: 2}}}},
	}
	for _, c := range cases {
		bad, _ := check(c.r)
		if props(bad) != c.bad {
			t.Errorf("%s: violations [%s]; want [%s]", c.name, props(bad), c.bad)
			for _, v := range bad {
				t.Logf("  %s", v.Msg)
			}
		}
	}
}

func TestSafetyOracle_permitLossCases(t *testing.T) {
	p := permitHold
	force := span{Kind: "force", Target: -1, Name: "n", From: 500 * tms, To: 501 * tms}
	delLock := force
	delLock.Kind, delLock.Keys = "del", "lock"
	snap := func(from time.Duration, leases ...lease) permitSnap {
		return permitSnap{Name: "n", From: from, To: from + tms, Leases: leases}
	}
	cases := []struct {
		name string
		r    run
		bad  string
	}{
		{name: "a freed permit taken while its holder ends within its bound",
			r: run{holds: []hold{p(1, "a", 1, 0, 10*tms, 830*tms, 1), p(2, "b", 1, 550*tms, 560*tms, time.Second, 2)}, faults: []span{force}}},
		{name: "a freed permit taken while its holder lives on",
			r:   run{holds: []hold{p(1, "a", 1, 0, 10*tms, 1200*tms, 1), p(2, "b", 1, 550*tms, 560*tms, 2*time.Second, 2)}, faults: []span{force}},
			bad: "over-limit,loss-late"},
		{name: "DEL of the lock leaves the permits",
			r:   run{holds: []hold{p(1, "a", 1, 0, 10*tms, 830*tms, 1), p(2, "b", 1, 550*tms, 560*tms, time.Second, 2)}, faults: []span{delLock}},
			bad: "over-limit"},
		{name: "no lease after a force release",
			r: run{holds: []hold{p(1, "a", 1, 0, 10*tms, 830*tms, 1)}, faults: []span{force}, permits: []permitSnap{snap(600 * tms)}}},
		{name: "no lease without a loss",
			r: run{holds: []hold{p(1, "a", 1, 0, 10*tms, 830*tms, 1)}, permits: []permitSnap{snap(600 * tms)}}, bad: "lease-gone"},
	}
	for _, c := range cases {
		bad, _ := checkPermits(c.r)
		if props(bad) != c.bad {
			t.Errorf("%s: violations [%s]; want [%s]", c.name, props(bad), c.bad)
			for _, v := range bad {
				t.Logf("  %s", v.Msg)
			}
		}
	}
}
