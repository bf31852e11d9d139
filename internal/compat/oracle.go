package compat

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Kinds are the kinds of hold a worker takes, in the table's order: a lock, a fair lock, a read, a
// write, a permit, a lock set (AcquireAll of two names) and a lock re-entered through its context.
var Kinds = []string{"lock", "fair", "read", "write", "permits", "set", "reentry"}

// Event is one attempt of a worker, as it prints it (one JSON line). Times are Unix nanoseconds
// of the host's clock, which both workers share. A hold is live from Got (after Redis granted it)
// to End (before its release was sent, or when its context ended: Lost says why).
type Event struct {
	Worker string   `json:"w"`
	Kind   string   `json:"kind"`
	Names  []string `json:"names"`
	Limit  int      `json:"limit,omitempty"`
	Call   int64    `json:"call"`
	Got    int64    `json:"got,omitempty"`
	End    int64    `json:"end,omitempty"`
	Lost   string   `json:"lost,omitempty"`
	Err    string   `json:"err,omitempty"`
	Busy   bool     `json:"busy,omitempty"`
}

func (e *Event) held() bool { return e.Got != 0 }

func (e *Event) String() string {
	return fmt.Sprintf("%s %s of %s (limit %d) live %d..%d", e.Worker, e.Kind, strings.Join(e.Names, ","), e.Limit,
		e.Got, e.End)
}

// Loud reports whether an error says which version of lockkit it met: a refusal a user can act
// on. Any other error, and any grant beside a conflicting hold, fails the check.
func Loud(err string) bool { return strings.Contains(err, "key schema") }

// shares reports whether holds of kinds a and b of one name may be live at once: reads with
// reads, and permits with permits (up to the lowest limit among them).
func shares(a, b string) bool { return a == b && (a == "read" || a == "permits") }

// Cell is the tally of one pair of kinds (a baseline worker's × a HEAD worker's) over a run.
type Cell struct {
	Excluded   int // an attempt made while the other version held a conflicting hold waited it out
	Refused    int // ... or was refused with an error naming the version (Loud)
	Unnamed    int // ... or failed with an error that names no version (a problem)
	Shared     int // holds that may share (reads, permits) were live at once across the versions
	Violations int // conflicting holds were live at once
}

// Result names the cell's outcome for the closing table.
func (c Cell) Result() string {
	switch {
	case c.Violations > 0:
		return fmt.Sprintf("violation (%d)", c.Violations)
	case c.Unnamed > 0:
		return fmt.Sprintf("error naming no schema (%d)", c.Unnamed)
	case c.Refused > 0:
		return fmt.Sprintf("loud refusal (%d), excluded (%d)", c.Refused, c.Excluded)
	case c.Excluded > 0:
		return fmt.Sprintf("excluded (%d)", c.Excluded)
	case c.Shared > 0:
		return fmt.Sprintf("shared (%d)", c.Shared)
	}
	return "not met"
}

// Report is what Check found.
type Report struct {
	Base, Head string             // the workers' names
	Cells      map[[2]string]Cell // [baseline kind, HEAD kind]
	Problems   []string           // every violation, unnamed error and lost hold, one line each
	Holds      map[string]int     // holds taken per worker
}

// Check reads the events of two workers named base and head and returns the pairs' tally and
// every problem: conflicting holds live at once (whatever their versions), permits beyond their
// lowest limit, errors that do not name a key schema, and holds lost. Re-entries are checked as
// their outer lock (the inner hold is the same owner's).
func Check(base, head string, events []Event) Report {
	r := Report{Base: base, Head: head, Cells: map[[2]string]Cell{}, Holds: map[string]int{}}
	byName := map[string][]*Event{}
	for i := range events {
		e := &events[i]
		switch {
		case e.Err != "" && !Loud(e.Err):
			r.Problems = append(r.Problems, fmt.Sprintf("error naming no key schema: %s %s of %s: %s", e.Worker,
				e.Kind, strings.Join(e.Names, ","), e.Err))
		case e.Lost != "":
			r.Problems = append(r.Problems, fmt.Sprintf("lost: %v: %s", e, e.Lost))
		}
		if e.held() {
			r.Holds[e.Worker]++
		}
		for _, n := range e.Names {
			byName[n] = append(byName[n], e)
		}
	}
	for _, evs := range byName {
		r.checkName(evs)
	}
	return r
}

// cell returns the key of the pair of a and b, from different workers, baseline kind first.
func (r *Report) cell(a, b *Event) [2]string {
	if a.Worker == r.Base {
		return [2]string{a.Kind, b.Kind}
	}
	return [2]string{b.Kind, a.Kind}
}

func (r *Report) bump(a, b *Event, f func(*Cell)) {
	if a.Worker == b.Worker {
		return
	}
	k := r.cell(a, b)
	c := r.Cells[k]
	f(&c)
	r.Cells[k] = c
}

// checkName checks the events of one name.
func (r *Report) checkName(evs []*Event) {
	var holds []*Event
	for _, e := range evs {
		if e.held() {
			holds = append(holds, e)
		}
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].Got < holds[j].Got })
	for i, h := range holds {
		var permits []*Event // live at h.Got, h included
		for _, o := range holds[:i] {
			if o.End <= h.Got {
				continue
			}
			if shares(o.Kind, h.Kind) {
				r.bump(o, h, func(c *Cell) { c.Shared++ })
				if h.Kind == "permits" {
					permits = append(permits, o)
				}
				continue
			}
			r.Problems = append(r.Problems, fmt.Sprintf("VIOLATION: %v granted while %v", h, o))
			r.bump(o, h, func(c *Cell) { c.Violations++ })
		}
		if len(permits) > 0 {
			permits = append(permits, h)
			limit := slices.MinFunc(permits, func(a, b *Event) int { return a.Limit - b.Limit }).Limit
			if len(permits) > limit {
				r.Problems = append(r.Problems, fmt.Sprintf("VIOLATION: %d permits live at once, lowest limit %d: %v",
					len(permits), limit, permits))
				for _, o := range permits[:len(permits)-1] {
					r.bump(o, h, func(c *Cell) { c.Violations++ })
				}
			}
		}
	}
	// An attempt made while another worker held a conflicting hold of the name: it waited that
	// hold out (or ran out of time), or was refused.
	for _, a := range evs {
		for _, o := range holds {
			if o == a || o.Got > a.Call || o.End <= a.Call || shares(o.Kind, a.Kind) {
				continue
			}
			switch {
			case a.Err != "" && Loud(a.Err):
				r.bump(o, a, func(c *Cell) { c.Refused++ })
			case a.Err != "":
				r.bump(o, a, func(c *Cell) { c.Unnamed++ })
			case a.Busy || a.held() && a.Got >= o.End:
				r.bump(o, a, func(c *Cell) { c.Excluded++ })
			}
		}
	}
}

// Table renders the pairs as a markdown table: a row per baseline kind, a column per HEAD kind.
func (r *Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %s \\ %s |", r.Base, r.Head)
	for _, k := range Kinds {
		fmt.Fprintf(&b, " %s |", k)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(Kinds)) + "\n")
	for _, bk := range Kinds {
		fmt.Fprintf(&b, "| %s |", bk)
		for _, hk := range Kinds {
			fmt.Fprintf(&b, " %s |", r.Cells[[2]string{bk, hk}].Result())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// UnmetKinds returns the baseline kinds and the HEAD kinds among the pairs not met yet, each in
// the order of Kinds: the kinds to steer each worker to.
func (r *Report) UnmetKinds() (base, head []string) {
	unmet := r.Unmet()
	for _, k := range Kinds {
		if slices.ContainsFunc(unmet, func(p string) bool { return strings.HasPrefix(p, k+"×") }) {
			base = append(base, k)
		}
		if slices.ContainsFunc(unmet, func(p string) bool { return strings.HasSuffix(p, "×"+k) }) {
			head = append(head, k)
		}
	}
	return base, head
}

// Unmet lists the pairs of kinds the run never brought together (no cell evidence either way).
func (r *Report) Unmet() []string {
	var out []string
	for _, bk := range Kinds {
		for _, hk := range Kinds {
			if r.Cells[[2]string{bk, hk}].Result() == "not met" {
				out = append(out, bk+"×"+hk)
			}
		}
	}
	return out
}
