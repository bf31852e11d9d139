package main

import (
	"strings"
	"testing"
	"time"
)

// #38's held-lock targets apply to lockkit's row at the short TTL, each on its own metric.
func TestHeldTargets(t *testing.T) {
	p := fullParams()
	fast := heldFastName(p)
	if !isHeldFast(fast) || isHeldFast("lockkit") || isHeldFast("redislock + DIY ticker") {
		t.Fatalf("isHeldFast does not tell %q alone", fast)
	}
	s := newStore()
	param := "100000 locks"
	for metric, v := range map[string][]float64{
		"redis_us_renew": {2.1, 2.5, 2.2}, "client_us_renew": {3.5, 3.4, 3.6}, "fg_acq_p50_x": {1.2, 1.3, 1.1},
		"fg_rel_p50_x": {1.4, 1.5, 1.2}, "fg_acq_p99_x": {1.9, 2.4, 2.1}, "fg_rel_p99_x": {1.5, 1.7, 1.6},
		"mem_lock_b":         {990, 1000, 1010},
		"fg_acq_other_p50_x": {1.1, 1.1, 1.1}, "fg_rel_other_p50_x": {1.1, 1.1, 1.1}, "fg_acq_other_p99_x": {1.5, 1.5, 1.5},
		"fg_rel_other_p99_x": {2.5, 2.5, 2.6},
	} {
		fill(s, "held", param, metric, map[string][]float64{fast: v, "lockkit": {99, 99, 99}})
	}
	want := map[string]bool{
		"Redis server CPU per renewal": true, "client CPU per renewal": false, "acquire p50 beside the held locks (through their": true,
		"release p50 beside the held locks (through their": true, "acquire p99 beside the held locks (through their": false,
		"release p99 beside the held locks (through their": true, "memory per held lock": true,
		"acquire p50 beside the held locks (through another": true, "release p50 beside the held locks (through another": true,
		"acquire p99 beside the held locks (through another": true, "release p99 beside the held locks (through another": false,
	}
	ts := issueTargets(s, map[string]bool{"held": true})
	if len(ts) != len(want) {
		t.Fatalf("%d targets, want %d: %+v", len(ts), len(want), ts)
	}
	for _, tg := range ts {
		if !strings.HasSuffix(tg.what, fast) || tg.row != fast || at(tg.scn, tg.param) != param {
			t.Errorf("target %q on row %q at %q", tg.what, tg.row, at(tg.scn, tg.param))
		}
		found := false
		for what, pass := range want {
			if strings.Contains(tg.what, what) {
				found = true
				if tg.pass() != pass {
					t.Errorf("%s: pass %v, want %v (%+v)", tg.what, tg.pass(), pass, tg.got)
				}
			}
		}
		if !found {
			t.Errorf("unexpected target %q", tg.what)
		}
	}
	if ts := issueTargets(s, map[string]bool{"hot": true}); len(ts) != 0 {
		t.Errorf("held targets without the held scenario: %+v", ts)
	}
	if p.heldFastTTL != 3*time.Second || p.heldN != 100_000 || p.heldFastObserve < 20*time.Second {
		t.Errorf("the full run does not hold #38's 100 000 locks at 3 s for 20 s: %+v", p)
	}
}
