package chaos_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

// The safety oracle on synthetic histories: it must flag each kind of violation, and must not flag
// the close but sound cases.

const tms = time.Millisecond

// holder returns a fresh hold of name by token tok on client 0: sent at sent, returned at ret,
// live until live.
func holder(id int, tok string, sent, ret, live time.Duration, fence int64) hold {
	return hold{ID: id, Client: 0, Name: "n", Tok: tok, Kind: "acquire", TTL: time.Second, Call: sent, Sent: sent, Ret: ret,
		Live: live, End: live + tms, Fence: fence, Holds: 1, Cause: "released"}
}

func props(vs []verdict) string {
	var p []string
	for _, v := range vs {
		p = append(p, v.Prop)
	}
	return strings.Join(p, ",")
}

func TestSafetyOracle_cases(t *testing.T) {
	lost := func(h hold, at time.Duration) hold {
		h.LostAt, h.Why, h.Live, h.End, h.Cause = at, "expired", at, at+tms, "lost:expired"
		return h
	}
	do := func(h hold, ret time.Duration) hold {
		h.Kind, h.DoErr, h.DoLive, h.DoRet = "do", "lost", true, ret
		return h
	}
	fault := func(kind string, target int, from, to time.Duration) span {
		return span{Kind: kind, Target: target, From: from, To: to}
	}
	fail := failed{Client: 0, Name: "n", Tok: "x", TTL: 3 * time.Second, Call: 100 * tms, Ret: 200 * tms, Checked: 1300 * tms, Seen: 1}
	cases := []struct {
		name        string
		r           run
		bad, unsure string // the props flagged, in order
	}{
		{name: "sequential holders",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 40*tms, 1), holder(2, "b", 50*tms, 60*tms, 90*tms, 2)}}},
		{name: "overlap",
			r:   run{holds: []hold{holder(1, "a", 0, 10*tms, 100*tms, 1), holder(2, "b", 50*tms, 60*tms, 90*tms, 2)}},
			bad: "overlap"},
		{name: "cancelled between the other's send and return",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 55*tms, 1), holder(2, "b", 50*tms, 60*tms, 90*tms, 2)}}},
		{name: "the other's acquisition returned after the cancel",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 58*tms, 1), holder(2, "b", 20*tms, 60*tms, 90*tms, 2)}}},
		{name: "acquisitions concurrent: no order between them",
			r: run{holds: []hold{holder(1, "a", 0, 30*tms, 100*tms, 2), holder(2, "b", 20*tms, 60*tms, 90*tms, 1)}}},
		{name: "overlap within the timer lateness",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 70*tms, 1), holder(2, "b", 50*tms, 60*tms, 90*tms, 2)},
				late: []span{{From: 40 * tms, To: 80 * tms, Target: 20_000}}},
			unsure: "overlap"},
		{name: "fence inversion",
			r:   run{holds: []hold{holder(1, "a", 0, 10*tms, 15*tms, 5), holder(2, "b", 20*tms, 30*tms, 40*tms, 4)}},
			bad: "fence"},
		{name: "re-entry keeps its fence",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 50*tms, 5),
				{ID: 2, Name: "n", Tok: "a", Kind: "ctx", Outer: 1, Sent: 20 * tms, Ret: 21 * tms, Live: 30 * tms, End: 31 * tms, Fence: 5, Holds: 2}}}},
		{name: "re-entry with another fence",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 50*tms, 5),
				{ID: 2, Name: "n", Tok: "a", Kind: "ctx", Outer: 1, Sent: 20 * tms, Ret: 21 * tms, Live: 30 * tms, End: 31 * tms, Fence: 6, Holds: 2}}},
			bad: "reentry-fence"},
		{name: "replayed WithOwner re-entry answering one hold after the owner released",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 50*tms, 5),
				{ID: 2, Name: "n", Tok: "a", Kind: "owner", Outer: 1, Sent: 20 * tms, Ret: 80 * tms, Live: 90 * tms, End: 91 * tms, Fence: 5, Holds: 1}}}},
		{name: "WithOwner re-entry returned before the acquisition it entered",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 50*tms, 5),
				{ID: 2, Name: "n", Tok: "a", Kind: "owner", Outer: 1, Sent: 60 * tms, Ret: 70 * tms, Live: 90 * tms, End: 91 * tms, Fence: 6, Holds: 2},
				{ID: 3, Name: "n", Tok: "a", Kind: "owner", Outer: 1, Sent: 60 * tms, Ret: 71 * tms, Live: 90 * tms, End: 91 * tms, Fence: 6, Holds: 1}}}},
		{name: "replayed WithToken acquisition answering the hold a co-owner added meanwhile",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 50*tms, 5),
				{ID: 2, Name: "n", Tok: "a", Kind: "token", Sent: 60 * tms, Ret: 90 * tms, Live: 95 * tms, End: 96 * tms, Fence: 6, Holds: 2},
				{ID: 3, Name: "n", Tok: "a", Kind: "token", Sent: 70 * tms, Ret: 71 * tms, Live: 95 * tms, End: 96 * tms, Fence: 6, Holds: 2}},
				faults: []span{fault("replyloss", 0, 61*tms, 80*tms)}}},
		{name: "WithToken hold with a fence no acquisition got (no reply loss)",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 50*tms, 5),
				{ID: 2, Name: "n", Tok: "a", Kind: "token", Sent: 60 * tms, Ret: 90 * tms, Live: 95 * tms, End: 96 * tms, Fence: 6, Holds: 2},
				{ID: 3, Name: "n", Tok: "a", Kind: "token", Sent: 70 * tms, Ret: 71 * tms, Live: 95 * tms, End: 96 * tms, Fence: 6, Holds: 2}}},
			bad: "reentry-fence,reentry-fence"},
		{name: "replayed WithToken acquisition whose fence is not above an earlier one",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 50*tms, 5),
				{ID: 2, Name: "n", Tok: "b", Kind: "token", Sent: 60 * tms, Ret: 90 * tms, Live: 95 * tms, End: 96 * tms, Fence: 4, Holds: 2},
				{ID: 3, Name: "n", Tok: "b", Kind: "token", Sent: 70 * tms, Ret: 71 * tms, Live: 95 * tms, End: 96 * tms, Fence: 4, Holds: 2}},
				faults: []span{fault("replyloss", 0, 61*tms, 80*tms)}},
			bad: "fence"},
		{name: "re-entry took the lock afresh while the hold it entered was live",
			r: run{holds: []hold{holder(1, "a", 0, 10*tms, 50*tms, 5),
				{ID: 2, Name: "n", Tok: "a", Kind: "owner", Outer: 1, Sent: 20 * tms, Ret: 21 * tms, Live: 30 * tms, End: 31 * tms, Fence: 6, Holds: 1}}},
			bad: "reentry-not-held"},
		{name: "loss while healthy",
			r:   run{holds: []hold{lost(holder(1, "a", 0, 10*tms, 0, 1), 2*time.Second)}},
			bad: "loss-while-healthy"},
		{name: "loss after a fault on its path",
			r: run{holds: []hold{lost(holder(1, "a", 0, 10*tms, 0, 1), 2*time.Second)},
				faults: []span{fault("reset", 0, 1000*tms, 1100*tms)}}},
		{name: "loss after a paused node",
			r: run{holds: []hold{lost(holder(1, "a", 0, 10*tms, 0, 1), 2*time.Second)},
				faults: []span{fault("pause", -1, 1500*tms, 1600*tms)}}},
		{name: "loss while another client's path had a fault",
			r: run{holds: []hold{lost(holder(1, "a", 0, 10*tms, 0, 1), 2*time.Second)},
				faults: []span{fault("reset", 1, 1500*tms, 1600*tms)}},
			bad: "loss-while-healthy"},
		{name: "loss after a slow command",
			r: run{holds: []hold{lost(holder(1, "a", 0, 10*tms, 0, 1), 2*time.Second)},
				slow: []span{{Kind: "slow", Target: 0, From: 1200 * tms, To: 1500 * tms}}}},
		{name: "loss of a lock Extend shortened, after a command too slow for the shorter TTL",
			r: run{holds: []hold{func() hold {
				h := lost(holder(1, "a", 0, 10*tms, 0, 1), 2*time.Second)
				h.Extends = []extend{{TTL: 60 * tms, At: 1900 * tms, OK: true}}
				return h
			}()}, slow: []span{{Kind: "slow", Target: 0, From: 1950 * tms, To: 1975 * tms}}}},
		{name: "loss while starved",
			r: run{holds: []hold{lost(holder(1, "a", 0, 10*tms, 0, 1), 2*time.Second)},
				late: []span{{From: 1200 * tms, To: 1300 * tms, Target: 300_000}}}},
		{name: "loss while goroutines waited to run (the scheduler's samples, not the probe)",
			r: run{holds: []hold{lost(holder(1, "a", 0, 10*tms, 0, 1), 2*time.Second)},
				sched: []span{{From: 1200 * tms, To: 1300 * tms, Target: 300_000}}}},
		{name: "key without a TTL",
			r:   run{noTTL: map[string]time.Duration{locktest.Key("n", "fence"): time.Second}},
			bad: "no-ttl"},
		{name: "Do lost its completed work to a lost reply",
			r:   run{holds: []hold{do(holder(1, "a", 0, 10*tms, 300*tms, 1), 310*tms)}, faults: []span{fault("replyloss", 0, 305*tms, 400*tms)}},
			bad: "do-lost"},
		{name: "Do's release answered near the expiry",
			r: run{holds: []hold{do(holder(1, "a", 0, 10*tms, 850*tms, 1), 900*tms)}}},
		{name: "Do's release answered after a renewal, well before the expiry",
			r: run{holds: []hold{func() hold {
				h := do(holder(1, "a", 0, 10*tms, 1200*tms, 1), 1300*tms)
				h.Renewed = 700 * tms
				return h
			}()}},
			bad: "do-lost"},
		{name: "Do's release answered after the expiry",
			r: run{holds: []hold{do(holder(1, "a", 0, 10*tms, 300*tms, 1), 1200*tms)}}},
		{name: "Do's work ended with the lock lost",
			r: run{holds: []hold{func() hold { h := do(holder(1, "a", 0, 10*tms, 300*tms, 1), 310*tms); h.DoLive = false; return h }()}}},
		{name: "orphan after a late reply",
			r:   run{fails: []failed{fail}, faults: []span{fault("latency", 0, 50*tms, 500*tms)}},
			bad: "orphan"},
		{name: "orphan whose give-back failed",
			r: run{fails: []failed{fail}, faults: []span{fault("latency", 0, 50*tms, 500*tms)}, releaseErr: map[string]bool{"x": true}}},
		{name: "orphan after connection resets",
			r: run{fails: []failed{fail}, faults: []span{fault("reset", 0, 50*tms, 500*tms)}}},
		{name: "Redlock orphan on a minority of nodes",
			r:      run{redlock: true, fails: []failed{fail}, faults: []span{fault("latency", 0, 50*tms, 500*tms)}},
			unsure: "orphan"},
		{name: "failed acquisition cleaned up",
			r: run{fails: []failed{{Client: 0, Name: "n", Tok: "x", Call: 100 * tms, Ret: 200 * tms, Checked: 1300 * tms}}}},
		{name: "context never cancelled",
			r:   run{holds: []hold{{ID: 1, Name: "n", Tok: "a", Ret: 10 * tms, Live: 20 * tms, Holds: 1}}},
			bad: "not-cancelled"},
		{name: "panic",
			r:   run{panics: []span{{Kind: "panic", Detail: "(*core.Lock)(nil).Release panicked"}}},
			bad: "panic"},
	}
	for _, c := range cases {
		bad, unsure := check(c.r)
		if props(bad) != c.bad || props(unsure) != c.unsure {
			t.Errorf("%s: violations [%s], inconclusive [%s]; want [%s], [%s]", c.name, props(bad), props(unsure), c.bad, c.unsure)
			for _, v := range bad {
				t.Logf("  %s", v.Msg)
			}
		}
	}
}

// The report names every key without a TTL, and an excerpt shows both holders and the faults on
// their paths.
func TestSafetyOracle_excerpt(t *testing.T) {
	r := run{
		holds:  []hold{holder(1, "aaaaaaaa", 0, 10*tms, 100*tms, 1), holder(2, "bbbbbbbb", 50*tms, 60*tms, 90*tms, 2)},
		faults: []span{{Kind: "latency", Target: 0, From: 20 * tms, To: 30 * tms, Detail: "200ms"}},
		noTTL:  map[string]time.Duration{locktest.Key("n", "fence"): 0, locktest.Key("m", "fence"): 0},
	}
	bad, _ := check(r)
	if len(bad) != 2 {
		t.Fatalf("violations %v", bad)
	}
	o := &oracle{run: r, byID: map[int]*hold{1: &r.holds[0], 2: &r.holds[1]}}
	var all string
	for _, v := range bad {
		all += o.excerpt(v)
	}
	for _, want := range []string{"lockkit:{m}:fence, lockkit:{n}:fence", "hold 1: n client 0.0 acquire tok aaaaaa fence 1", "hold 2: n", "fault latency"} {
		if !strings.Contains(all, want) {
			t.Errorf("excerpt lacks %q:\n%s", want, all)
		}
	}
}
