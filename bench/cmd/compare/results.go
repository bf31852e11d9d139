package main

import (
	"fmt"
	"slices"
	"strings"
)

// metrics are one measurement's figures by name.
type metrics map[string]float64

// brief is the progress line of a measurement.
func (m metrics) brief() string {
	var parts []string
	for _, k := range []string{"ops_s", "p99_us", "allocs_op", "cs_s", "wait_p99_ms", "reads_s", "wwait_p99", "top_cs", "inner_cs",
		"mem_lock_b", "goroutines", "trips_int", "lost"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", k, num(v)))
		}
	}
	return strings.Join(parts, " ")
}

type cellKey struct{ scn, param, row string }

// store keeps every round's metrics per scenario, parameter and row, in the order first seen.
type store struct {
	params map[string][]string // scenario -> parameters
	rows   map[string][]string // scenario -> rows
	vals   map[cellKey]map[int]metrics
	errs   map[cellKey][]string
}

func newStore() *store {
	return &store{params: map[string][]string{}, rows: map[string][]string{},
		vals: map[cellKey]map[int]metrics{}, errs: map[cellKey][]string{}}
}

func (s *store) note(scn, param, row string) cellKey {
	if !slices.Contains(s.params[scn], param) {
		s.params[scn] = append(s.params[scn], param)
	}
	if !slices.Contains(s.rows[scn], row) {
		s.rows[scn] = append(s.rows[scn], row)
	}
	return cellKey{scn, param, row}
}

func (s *store) add(scn, param, row string, round int, m metrics) {
	k := s.note(scn, param, row)
	if s.vals[k] == nil {
		s.vals[k] = map[int]metrics{}
	}
	s.vals[k][round] = m
}

func (s *store) fail(scn, param, row string, err error) {
	k := s.note(scn, param, row)
	s.errs[k] = append(s.errs[k], err.Error())
}

// get summarizes one metric over the rounds.
func (s *store) get(scn, param, row, metric string) spread {
	var vs []float64
	for _, m := range s.vals[cellKey{scn, param, row}] {
		if v, ok := m[metric]; ok {
			vs = append(vs, v)
		}
	}
	return summarize(vs)
}

// ratio summarizes, over the rounds measured for both, a's metric divided by b's in the same
// round: paired ratios cancel the noise that hit both.
func (s *store) ratio(scn, param, a, b, metric string) spread {
	ma, mb := s.vals[cellKey{scn, param, a}], s.vals[cellKey{scn, param, b}]
	var vs []float64
	for r, x := range ma {
		y, ok := mb[r]
		if ok && y[metric] != 0 {
			vs = append(vs, x[metric]/y[metric])
		}
	}
	return summarize(vs)
}

// num formats a figure with about three significant digits.
func num(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

// cell is "median (min–max)"; just the median when every round agrees or there is one round.
func (sp spread) cell() string {
	if sp.n == 0 {
		return "–"
	}
	m, lo, hi := num(sp.med), num(sp.lo), num(sp.hi)
	if sp.n == 1 || (lo == m && hi == m) {
		return m
	}
	return fmt.Sprintf("%s (%s–%s)", m, lo, hi)
}
