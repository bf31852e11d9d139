package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var (
	lk      = lockkitConfig().name
	raw     = rawConfig().name
	fair    = lockkitFairConfig().name
	rl      = lockkitRedlockConfig().name
	rs3     = redsyncDefaults(3).name
	wantAll = map[string]bool{"uncontended": true, "hot": true, "redlock": true}
)

// fill records metric for each row, one value per round (rows[row][round]).
func fill(s *store, scn, param, metric string, rows map[string][]float64) {
	for row, vs := range rows {
		for r, v := range vs {
			m := s.vals[cellKey{scn, param, row}][r]
			if m == nil {
				m = metrics{}
			}
			m[metric] = v
			s.add(scn, param, row, r, m)
		}
	}
}

func TestIssueTargets(t *testing.T) {
	for _, c := range []struct {
		name, scn, param, metric, what string
		rows                           map[string][]float64
		pass, straddles                bool
		med                            float64
	}{
		{"cpu within 1.3x of raw", "uncontended", "16", "cpu_op_us", "Redis server CPU per lock+unlock, lockkit ÷",
			map[string][]float64{lk: {60, 62, 64}, raw: {50, 50, 50}}, true, false, 1.24},
		{"cpu above 1.3x of raw, a round below", "uncontended", "64", "cpu_op_us", "Redis server CPU per lock+unlock, lockkit ÷",
			map[string][]float64{lk: {60, 66, 72}, raw: {50, 50, 50}}, false, true, 1.32},
		{"cpu ratio at the bound, paired per round", "uncontended", "1", "cpu_op_us", "Redis server CPU per lock+unlock, lockkit ÷",
			map[string][]float64{lk: {130, 65, 200}, raw: {100, 50, 150}}, true, true, 1.3},
		{"7 commands per lock+unlock pass", "uncontended", "1", "total_op", "commands per lock+unlock",
			map[string][]float64{lk: {7, 7, 7}}, true, false, 7},
		{"12 commands per lock+unlock fail", "uncontended", "16", "total_op", "commands per lock+unlock",
			map[string][]float64{lk: {12.3, 12.3, 12.2}}, false, false, 12.3},
		{"ops/s 0.94x raw fails at 1 goroutine", "uncontended", "1", "ops_s", "ops/s, lockkit ÷ raw",
			map[string][]float64{lk: {94, 188, 282}, raw: {100, 200, 300}}, false, false, 0.94},
		{"ops/s 0.94x raw passes at 16", "uncontended", "16", "ops_s", "ops/s, lockkit ÷ raw",
			map[string][]float64{lk: {94, 188, 282}, raw: {100, 200, 300}}, true, false, 0.94},
		{"ops/s 0.61x raw fails at 64", "uncontended", "64", "ops_s", "ops/s, lockkit ÷ raw",
			map[string][]float64{lk: {61}, raw: {100}}, false, false, 0.61},
		{"Redlock ops/s equal to redsync's passes", "redlock-uncontended", "16", "ops_s", "ops/s, lockkit Redlock",
			map[string][]float64{rl: {100, 90, 110}, rs3: {90, 90, 120}}, true, true, 1},
		{"Redlock ops/s below redsync's fails", "redlock-uncontended", "1", "ops_s", "ops/s, lockkit Redlock",
			map[string][]float64{rl: {17, 18}, rs3: {25, 25}}, false, false, 0.7},
		{"Redlock CPU above redsync's fails", "redlock-uncontended", "1", "cpu_op_us", "Redis server CPU per lock+unlock, lockkit Redlock",
			map[string][]float64{rl: {263}, rs3: {164}}, false, false, 263.0 / 164},
		{"Redlock allocs below redsync's pass", "redlock-uncontended", "16", "allocs_op", "allocations per lock+unlock, lockkit Redlock",
			map[string][]float64{rl: {80, 81, 82}, rs3: {92, 92, 92}}, true, false, 81.0 / 92},
		{"fair 14 commands per critical section pass", "hot", "0 ms", "total_cs", "commands per critical section, lockkit fair",
			map[string][]float64{fair: {14, 15, 14.5}}, true, false, 14.5},
		{"fair 44 commands per critical section fail", "hot", "1 ms", "total_cs", "commands per critical section, lockkit fair",
			map[string][]float64{fair: {44, 45}}, false, false, 44.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore()
			fill(s, c.scn, c.param, c.metric, c.rows)
			var got []target
			for _, tg := range issueTargets(s, wantAll) {
				if strings.HasPrefix(tg.what, c.what) && tg.param == c.param {
					got = append(got, tg)
				}
			}
			if len(got) != 1 {
				t.Fatalf("%d targets %q at %s, want 1: %+v", len(got), c.what, c.param, issueTargets(s, wantAll))
			}
			tg := got[0]
			if tg.pass() != c.pass || tg.straddles() != c.straddles {
				t.Errorf("pass %v straddles %v, want %v %v (%+v)", tg.pass(), tg.straddles(), c.pass, c.straddles, tg.got)
			}
			if d := tg.got.med - c.med; d > 1e-9 || d < -1e-9 {
				t.Errorf("median %v, want %v", tg.got.med, c.med)
			}
			if strings.Contains(tg.result(), "FAIL") == c.pass {
				t.Errorf("result %q for pass %v", tg.result(), c.pass)
			}
		})
	}
}

func TestIssueTargets_missingFigures(t *testing.T) {
	s := newStore()
	s.fail("uncontended", "16", lk, errors.New("boom"))
	fill(s, "uncontended", "16", "ops_s", map[string][]float64{raw: {100}})
	ts := issueTargets(s, wantAll)
	if len(ts) != 4 { // cpu, commands, ops/s, #38's ops/s vs redislock: lockkit failed there, so every one is unmeasured
		t.Fatalf("%d targets, want 4: %+v", len(ts), ts)
	}
	for _, tg := range ts {
		if tg.pass() || tg.result() != "**FAIL** (not measured)" {
			t.Errorf("%s: a target without a figure reads %q", tg.what, tg.result())
		}
	}
	if ts := issueTargets(s, map[string]bool{"hot": true}); len(ts) != 0 {
		t.Errorf("targets of scenarios not run: %+v", ts)
	}
}

func TestBoundsAndLabels(t *testing.T) {
	if opsFloor("1") != 0.95 || opsFloor("16") != 0.9 || opsFloor("64") != 0.9 {
		t.Error("ops/s bounds are not 0.95 at 1 goroutine and 0.9 above")
	}
	for _, c := range [][3]string{{"uncontended", "1", "1 goroutine"}, {"redlock-uncontended", "16", "16 goroutines"},
		{"hot", "0 ms", "hold 0 ms"}, {"redlock-hot", "1 ms", "hold 1 ms"}} {
		if got := at(c[0], c[1]); got != c[2] {
			t.Errorf("at(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
	if b := (target{limit: 1.3}).bound(); b != "≤ 1.3" {
		t.Errorf("bound = %q", b)
	}
	if b := (target{limit: 0.9, atLeast: true}).bound(); b != "≥ 0.9" {
		t.Errorf("bound = %q", b)
	}
}

func TestWriteVerdicts(t *testing.T) {
	s := newStore()
	fill(s, "uncontended", "1", "cpu_op_us", map[string][]float64{lk: {105}, raw: {52}})
	fill(s, "uncontended", "1", "ops_s", map[string][]float64{lk: {99}, raw: {100}})
	fill(s, "uncontended", "1", "total_op", map[string][]float64{lk: {6}})
	fill(s, "uncontended", "1", "allocs_op", map[string][]float64{lk: {13}})
	fill(s, "uncontended", "1", "ops_s", map[string][]float64{twoScriptName: {105}})
	fill(s, "redlock-hot", "1 ms", "cs_s", map[string][]float64{lockkitRedlockConfig().name: {600, 1, 650}})
	anchor := redislockDefaults().name
	fill(s, "hot", "0 ms", "wait_p99_ms", map[string][]float64{lk: {2.9}, anchor: {6.9}})
	fill(s, "hot", "0 ms", "top_cs", map[string][]float64{lk: {2}, anchor: {8}})
	fill(s, "hot", "0 ms", "total_cs", map[string][]float64{lk: {6}, anchor: {25}, fair: {44}})
	var b bytes.Buffer
	writeVerdicts(&b, s, wantAll)
	doc := b.String()
	for _, want := range []string{
		"The targets (issue #22", "1.3× the raw SET NX floor", "at most 15 commands per critical section",
		"**3 of 10 checks FAIL in this run**", // cpu 2.02×, fair 44 and the Redlock round at 1 cs/s fail; the rest pass
		"| #38 ops/s, lockkit (defaults) ÷ two-script floor | uncontended | 1 goroutine | 0.94 | ≥ 0.9 | lockkit: 99.0; two-script floor: 105 | pass |",
		"| #38 allocations per lock+unlock, lockkit (defaults) | uncontended | 1 goroutine | 13.0 | ≤ 14 | – | pass |",
		"| Redis server CPU per lock+unlock, lockkit ÷ raw floor | uncontended | 1 goroutine | 2.02 | ≤ 1.3 | lockkit: 105; raw floor: 52.0 | **FAIL** |",
		"| ops/s, lockkit ÷ raw floor | uncontended | 1 goroutine | 0.99 | ≥ 0.95 | lockkit: 99.0; raw floor: 100 | pass |",
		"| commands per lock+unlock, lockkit (top-level + in-script) | uncontended | 1 goroutine | 6.00 | ≤ 7 | – | pass |",
		"| commands per critical section, lockkit fair (top-level + in-script) | hot | hold 0 ms | 44.0 | ≤ 15 | – | **FAIL** |",
		"| wait p99 (ms) | hot | 0 ms | 2.90 | redislock (defaults) | 6.90 | pass |",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("verdict lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(doc)
	}
	b.Reset()
	writeVerdicts(&b, newStore(), wantAll)
	if !strings.Contains(b.String(), "No check could be made in this run.") {
		t.Errorf("empty run: %s", b.String())
	}
}
