package main

import (
	"fmt"
	"io"
	"strings"
)

// check is one of the issue's requirements applied to one pair of rows.
type check struct {
	what, scn, param, row, vs string
	ours, theirs              spread
	pass                      bool
	overlap                   bool   // the min–max ranges overlap: within this run's noise
	note                      string // context the figure alone does not give
}

// lowerWins checks that lockkit's median of metric is below each anchor's.
func lowerWins(s *store, what, scn, lockkitRow, metric string) []check {
	var out []check
	for _, p := range s.params[scn] {
		ours := s.get(scn, p, lockkitRow, metric)
		for _, row := range s.rows[scn] {
			if !isAnchor(row) {
				continue
			}
			theirs := s.get(scn, p, row, metric)
			if ours.n == 0 || theirs.n == 0 {
				continue
			}
			c := check{what: what, scn: scn, param: p, row: lockkitRow, vs: row, ours: ours, theirs: theirs,
				pass: ours.med < theirs.med, overlap: ours.hi >= theirs.lo && theirs.hi >= ours.lo}
			if same := s.get(scn, p, row, "same_pct"); metric == "wait_p99_ms" && same.med >= 90 {
				c.note = fmt.Sprintf("%s, hold %s: the goroutine that released re-took the lock in %.1f %% of critical sections (its waiters sleep between tries), so nearly all measured waits are those instant re-acquisitions; the goroutines left waiting waited up to %s ms (wait max)",
					row, p, same.med, num(s.get(scn, p, row, "wait_max_ms").med))
			}
			out = append(out, c)
		}
	}
	return out
}

// isAnchor tells the rows of the libraries lockkit must beat.
func isAnchor(row string) bool {
	for _, cs := range [][]config{hotConfigs(), redlockHotConfigs()} {
		for _, c := range cs {
			if c.name == row {
				return c.anchor
			}
		}
	}
	return false
}

// target is one of issue #22's bounds on a figure of this run: one row's metric, or (vs set) the
// paired per-round ratio of the row's metric to the vs row's, so that noise hitting both cancels.
type target struct {
	what, scn, param string
	row, vs          string
	got              spread // the figure over the rounds; n == 0: not measured
	ours, theirs     spread // with vs: the two rows' own figures
	limit            float64
	atLeast          bool // the median must be ≥ limit (otherwise ≤ limit)
	every            bool // every round must meet the bound (its worst one), not only the median
}

func (t target) meets(v float64) bool {
	if t.atLeast {
		return v >= t.limit
	}
	return v <= t.limit
}

// pass: the median of the rounds (with every, each round) meets the bound. A target without a
// figure fails.
func (t target) pass() bool {
	switch {
	case t.got.n == 0:
		return false
	case t.every && t.atLeast:
		return t.meets(t.got.lo)
	case t.every:
		return t.meets(t.got.hi)
	}
	return t.meets(t.got.med)
}

// straddles: the rounds' min and max fall on both sides of the bound (within this run's noise).
func (t target) straddles() bool { return t.got.n > 0 && t.meets(t.got.lo) != t.meets(t.got.hi) }

func (t target) bound() string {
	if t.atLeast {
		return fmt.Sprintf("≥ %g", t.limit)
	}
	return fmt.Sprintf("≤ %g", t.limit)
}

func (t target) result() string {
	if t.got.n == 0 {
		return "**FAIL** (not measured)"
	}
	return result(check{pass: t.pass(), overlap: t.straddles()})
}

// medians is the two rows' own medians behind a ratio.
func (t target) medians() string {
	if t.vs == "" {
		return "–"
	}
	return fmt.Sprintf("%s: %s; %s: %s", t.row, t.ours.cell(), t.vs, t.theirs.cell())
}

// bounds makes a target per parameter of scn at which row was measured or failed; limit gives
// the bound at that parameter.
func bounds(s *store, what, scn, row, vs, metric string, atLeast bool, limit func(param string) float64) []target {
	var out []target
	for _, p := range s.params[scn] {
		k := cellKey{scn, p, row}
		if _, ok := s.vals[k]; !ok && len(s.errs[k]) == 0 {
			continue
		}
		t := target{what: what, scn: scn, param: p, row: row, vs: vs, limit: limit(p), atLeast: atLeast,
			got: s.get(scn, p, row, metric)}
		if vs != "" {
			t.ours, t.theirs = t.got, s.get(scn, p, vs, metric)
			t.got = s.ratio(scn, p, row, vs, metric)
		}
		out = append(out, t)
	}
	return out
}

func fixed(v float64) func(string) float64 { return func(string) float64 { return v } }

// opsFloor is the bound on uncontended ops/s ÷ raw floor: 0.95 at 1 goroutine, 0.9 above.
func opsFloor(goroutines string) float64 {
	if goroutines == "1" {
		return 0.95
	}
	return 0.9
}

// issueTargets are issue #22's targets for the scenarios run.
func issueTargets(s *store, want map[string]bool) []target {
	lk, raw := lockkitConfig().name, rawConfig().name
	var ts []target
	if want["uncontended"] {
		ts = append(ts, bounds(s, "Redis server CPU per lock+unlock, lockkit ÷ raw floor", "uncontended", lk, raw, "cpu_op_us", false, fixed(1.3))...)
		ts = append(ts, bounds(s, "commands per lock+unlock, lockkit (top-level + in-script)", "uncontended", lk, "", "total_op", false, fixed(7))...)
		ts = append(ts, bounds(s, "ops/s, lockkit ÷ raw floor", "uncontended", lk, raw, "ops_s", true, opsFloor)...)
	}
	if want["redlock"] {
		rl, rs := lockkitRedlockConfig().name, redsyncDefaults(3).name
		ts = append(ts, bounds(s, "ops/s, lockkit Redlock ÷ redsync, 3 nodes", "redlock-uncontended", rl, rs, "ops_s", true, fixed(1))...)
		ts = append(ts, bounds(s, "Redis server CPU per lock+unlock, lockkit Redlock ÷ redsync, 3 nodes", "redlock-uncontended", rl, rs, "cpu_op_us", false, fixed(1))...)
		ts = append(ts, bounds(s, "allocations per lock+unlock, lockkit Redlock ÷ redsync, 3 nodes", "redlock-uncontended", rl, rs, "allocs_op", false, fixed(1))...)
	}
	if want["hot"] {
		ts = append(ts, bounds(s, "commands per critical section, lockkit fair (top-level + in-script)", "hot", lockkitFairConfig().name, "", "total_cs", false, fixed(15))...)
	}
	ts = append(ts, pipelinedTargets(s, want)...)
	ts = append(ts, defaultTargets(s, want)...)
	return append(ts, heldTargets(s, want)...)
}

// defaultTargets are issue #38's, on lockkit at its defaults (pipelining on since #38): uncontended
// ops/s at least redislock's at 16 and 64 goroutines, and at 1 goroutine at least 0.9× the
// two-script floor's with at most 14 allocations per lock+unlock; and on the hot key over 3 nodes
// (pipelined at the defaults) no round below 100 critical sections a second: #38's stall ran one.
func defaultTargets(s *store, want map[string]bool) []target {
	var ts []target
	lk := lockkitConfig().name
	if want["uncontended"] {
		vs := bounds(s, "#38 ops/s, lockkit (defaults) ÷ redislock (defaults)", "uncontended", lk, redislockDefaults().name, "ops_s", true, fixed(1))
		ts = append(ts, append(atParam(vs, "16"), atParam(vs, "64")...)...)
		ts = append(ts, atParam(bounds(s, "#38 ops/s, lockkit (defaults) ÷ two-script floor", "uncontended", lk, twoScriptName, "ops_s", true, fixed(0.9)), "1")...)
		ts = append(ts, atParam(bounds(s, "#38 allocations per lock+unlock, lockkit (defaults)", "uncontended", lk, "", "allocs_op", false, fixed(14)), "1")...)
	}
	if want["redlock"] {
		for _, row := range []string{lockkitRedlockConfig().name, lockkitRedlockPipelinedConfig().name} {
			for _, t := range bounds(s, "#38 critical sections/s on the hot key, every round (no stall), "+row, "redlock-hot", row, "", "cs_s", true, fixed(100)) {
				t.every = true
				ts = append(ts, t)
			}
		}
	}
	return ts
}

// pipelinedTargets are issue #31's, on the pipelined rows: uncontended ops/s at least 0.95× the
// raw floor's at 1 goroutine, 1.0× at 16 and 1.5× at 64, and 0.65× the auto-pipelined floor's at
// 64; Redis server CPU per lock+unlock at most the raw floor's at 16 and 64; over 3 nodes, at least
// redsync's ops/s, and 1.5× at 64 goroutines.
func pipelinedTargets(s *store, want map[string]bool) []target {
	var ts []target
	if want["uncontended"] {
		lk, raw := lockkitPipelinedName, rawConfig().name
		ts = append(ts, bounds(s, "#31 ops/s, lockkit (pipelined) ÷ raw floor", "uncontended", lk, raw, "ops_s", true, perG(0.95, 1, 1.5))...)
		ts = append(ts, atParam(bounds(s, "#31 ops/s, lockkit (pipelined) ÷ raw floor (auto-pipelined)", "uncontended", lk, rawAutoName, "ops_s", true, fixed(0.65)), "64")...)
		cpu := bounds(s, "#31 Redis server CPU per lock+unlock, lockkit (pipelined) ÷ raw floor", "uncontended", lk, raw, "cpu_op_us", false, fixed(1))
		ts = append(ts, append(atParam(cpu, "16"), atParam(cpu, "64")...)...)
	}
	if want["redlock"] {
		ts = append(ts, bounds(s, "#31 ops/s, lockkit Redlock (pipelined) ÷ redsync, 3 nodes", "redlock-uncontended",
			lockkitRedlockPipelinedConfig().name, redsyncDefaults(3).name, "ops_s", true, perG(1, 1, 1.5))...)
	}
	return ts
}

// perG is a bound by goroutine count: at1 at 1 goroutine, at16 at 16, at64 at 64 (and above).
func perG(at1, at16, at64 float64) func(string) float64 {
	return func(g string) float64 {
		switch g {
		case "1":
			return at1
		case "16":
			return at16
		}
		return at64
	}
}

// atParam keeps the targets at parameter p.
func atParam(ts []target, p string) []target {
	var out []target
	for _, t := range ts {
		if t.param == p {
			out = append(out, t)
		}
	}
	return out
}

// contendedChecks: under contention lockkit beats every anchor on wait p99 and commands.
func contendedChecks(s *store, want map[string]bool) []check {
	var checks []check
	for _, sc := range []struct {
		on       bool
		scn, row string
	}{{want["hot"], "hot", lockkitConfig().name}, {want["redlock"], "redlock-hot", lockkitRedlockConfig().name}} {
		if !sc.on {
			continue
		}
		checks = append(checks, lowerWins(s, "wait p99 (ms)", sc.scn, sc.row, "wait_p99_ms")...)
		checks = append(checks, lowerWins(s, "top-level commands per critical section", sc.scn, sc.row, "top_cs")...)
		checks = append(checks, lowerWins(s, "all commands per critical section (top-level + in-script)", sc.scn, sc.row, "total_cs")...)
	}
	return checks
}

// at names a parameter of scn for the verdict tables.
func at(scn, p string) string {
	switch {
	case strings.HasSuffix(scn, "hot"):
		return "hold " + p
	case scn == "held":
		return p
	case p == "1":
		return "1 goroutine"
	}
	return p + " goroutines"
}

// targetsText is the verdict's statement of what it checks.
const targetsText = "The targets (issue #22, #31's on the pipelined rows, marked #31, and #38's at lockkit's defaults, marked #38), each checked within this run: uncontended, lockkit's Redis server CPU per lock+unlock at most 1.3× the raw SET NX floor's, " +
	"at most 7 Redis commands per lock+unlock (top-level + in-script), and ops/s at least 0.95× the raw floor's at 1 goroutine and 0.9× at more; " +
	"over 3 nodes, lockkit Redlock at least redsync's ops/s and at most its server CPU and allocations per lock+unlock, at every goroutine count; " +
	"fair mode at most 15 commands per critical section on the hot key; and, kept from before, under contention lockkit beats every anchor " +
	"(redsync, redislock, at defaults and tuned) on wait p99 and on Redis commands per critical section. " +
	"#38: at the defaults, uncontended ops/s at least redislock's at 16 and 64 goroutines, at least 0.9× the two-script floor's and at most 14 allocations per lock+unlock at 1; " +
	"over 3 nodes on the hot key, every round at least 100 critical sections a second. " + heldTargetsText +
	"Ratios are paired per round (both rows measured back to back) and a target passes on the median of the rounds (rows marked \"every round\": on the worst). "

func writeVerdicts(w io.Writer, s *store, want map[string]bool) {
	targets, checks := issueTargets(s, want), contendedChecks(s, want)
	failed, total := 0, len(targets)+len(checks)
	for _, t := range targets {
		if !t.pass() {
			failed++
		}
	}
	for _, c := range checks {
		if !c.pass {
			failed++
		}
	}
	fmt.Fprintf(w, "## Verdict\n\n%s", targetsText)
	switch {
	case total == 0:
		fmt.Fprintf(w, "No check could be made in this run.\n\n")
	case failed == 0:
		fmt.Fprintf(w, "**All %d checks pass in this run.**\n\n", total)
	default:
		fmt.Fprintf(w, "**%d of %d checks FAIL in this run** (marked FAIL below).\n\n", failed, total)
	}
	if len(targets) > 0 {
		fmt.Fprintf(w, "| target | scenario | at | this run | bound | medians behind the ratio | result |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, t := range targets {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", t.what, t.scn, at(t.scn, t.param), t.got.cell(), t.bound(), t.medians(), t.result())
		}
		fmt.Fprintln(w)
	}
	if len(checks) > 0 {
		fmt.Fprintf(w, "| check | scenario | hold | lockkit | anchor | anchor's | result |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		var notes []string
		for _, c := range checks {
			r := result(c)
			if c.note != "" {
				notes = append(notes, c.note)
				r += fmt.Sprintf(" [%d]", len(notes))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", c.what, c.scn, c.param, c.ours.cell(), c.vs, c.theirs.cell(), r)
		}
		fmt.Fprintln(w)
		for i, n := range notes {
			fmt.Fprintf(w, "[%d] %s.\n\n", i+1, n)
		}
	}
	fmt.Fprintf(w, "*within noise*: the rounds' min and max fall on both sides of the bound, or the min–max ranges of lockkit and the anchor overlap, so this run alone cannot settle the comparison.\n\n")
}

func result(c check) string {
	r := "pass"
	if !c.pass {
		r = "**FAIL**"
	}
	if c.overlap {
		r += " (within noise)"
	}
	return r
}
