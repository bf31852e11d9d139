package main

import (
	"fmt"
	"io"
)

// check is one of the requirements applied to one pair of rows.
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

func writeVerdicts(w io.Writer, s *store, want map[string]bool) {
	var checks []check
	if want["hot"] {
		checks = append(checks, lowerWins(s, "wait p99 (ms)", "hot", "lockkit", "wait_p99_ms")...)
		checks = append(checks, lowerWins(s, "top-level commands per critical section", "hot", "lockkit", "top_cs")...)
		checks = append(checks, lowerWins(s, "all commands per critical section (top-level + in-script)", "hot", "lockkit", "total_cs")...)
	}
	if want["redlock"] {
		checks = append(checks, lowerWins(s, "wait p99 (ms)", "redlock-hot", "lockkit Redlock", "wait_p99_ms")...)
		checks = append(checks, lowerWins(s, "top-level commands per critical section", "redlock-hot", "lockkit Redlock", "top_cs")...)
		checks = append(checks, lowerWins(s, "all commands per critical section (top-level + in-script)", "redlock-hot", "lockkit Redlock", "total_cs")...)
	}
	var floor []check
	if want["uncontended"] {
		for _, p := range s.params["uncontended"] {
			r := s.ratio("uncontended", p, "lockkit", "raw floor", "ops_s")
			if r.n == 0 {
				continue
			}
			floor = append(floor, check{what: "uncontended ops/s, lockkit ÷ raw floor (paired per round)", scn: "uncontended",
				param: p + " goroutines", ours: r, pass: r.med >= 0.95, overlap: r.lo < 0.95 && r.hi >= 0.95})
		}
	}
	failed := 0
	for _, c := range append(checks, floor...) {
		if !c.pass {
			failed++
		}
	}
	fmt.Fprintf(w, "## Verdict\n\n")
	fmt.Fprintf(w, "The targets: under contention lockkit beats every anchor (redsync, redislock, at defaults and tuned) on wait p99 and on Redis commands per critical section; uncontended it stays within 5 %% of the raw SET NX floor. ")
	switch {
	case len(checks)+len(floor) == 0:
		fmt.Fprintf(w, "No check could be made in this run.\n\n")
	case failed == 0:
		fmt.Fprintf(w, "**All %d checks pass in this run.**\n\n", len(checks)+len(floor))
	default:
		fmt.Fprintf(w, "**%d of %d checks FAIL in this run** (marked FAIL below).\n\n", failed, len(checks)+len(floor))
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
	if len(floor) > 0 {
		fmt.Fprintf(w, "| check | goroutines | lockkit ÷ raw floor | result |\n| --- | --- | --- | --- |\n")
		for _, c := range floor {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", c.what, c.param, c.ours.cell(), result(c))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "*within noise*: the min–max ranges of the rounds overlap (or straddle the 0.95 line), so this run alone cannot settle the comparison.\n\n")
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
