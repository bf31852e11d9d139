package compat_test

import (
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/compat"
)

// hold is a hold of kind on names by worker w, live from got to end (call 1 ns before got).
func hold(w, kind string, got, end int64, names ...string) compat.Event {
	return compat.Event{Worker: w, Kind: kind, Names: names, Call: got - 1, Got: got, End: end}
}

func permit(w string, limit int, got, end int64) compat.Event {
	e := hold(w, "permits", got, end, "n")
	e.Limit = limit
	return e
}

// The oracle flags what it must (synthetic histories): each case's problem is found and counted
// in the pair's cell, and a sound history of the same holds has none.
func TestCheck_flagsWhatItMust(t *testing.T) {
	for _, c := range []struct {
		name    string
		events  []compat.Event
		problem string    // "" for a sound history
		cell    [2]string // the pair it must be counted in
		result  string    // the cell's result's prefix
	}{
		{"a lock granted beside an older version's permit", []compat.Event{
			permit("base", 2, 10, 30), hold("head", "lock", 20, 40, "n")},
			"VIOLATION", [2]string{"permits", "lock"}, "violation (1)"},
		{"a set member granted beside a read", []compat.Event{
			hold("head", "read", 10, 30, "m"), hold("base", "set", 29, 40, "m", "n")},
			"VIOLATION", [2]string{"set", "read"}, "violation (1)"},
		{"one version's two writes at once", []compat.Event{
			hold("head", "write", 10, 30, "n"), hold("head", "write", 20, 40, "n")},
			"VIOLATION", [2]string{}, ""},
		{"permits beyond the lowest limit", []compat.Event{
			permit("base", 3, 10, 50), permit("head", 2, 20, 50), permit("base", 3, 30, 50)},
			"3 permits live at once, lowest limit 2", [2]string{"permits", "permits"}, "violation"},
		{"an error that names no key schema", []compat.Event{
			{Worker: "base", Kind: "lock", Names: []string{"n"}, Call: 1, Err: "unexpected lock value"}},
			"error naming no key schema", [2]string{}, ""},
		{"a hold lost", []compat.Event{
			{Worker: "head", Kind: "lock", Names: []string{"n"}, Call: 1, Got: 2, End: 3, Lost: "not owner"}},
			"lost", [2]string{}, ""},
		{"a lock waits out an older version's write", []compat.Event{
			hold("base", "write", 10, 30, "n"), {Worker: "head", Kind: "lock", Names: []string{"n"}, Call: 20, Got: 31, End: 40}},
			"", [2]string{"write", "lock"}, "excluded (1)"},
		{"a read refused by name of the other schema", []compat.Event{
			hold("base", "lock", 10, 30, "n"),
			{Worker: "head", Kind: "read", Names: []string{"n"}, Call: 20, Err: "lockkit: the lock key holds a value of key schema 1"}},
			"", [2]string{"lock", "read"}, "loud refusal (1)"},
		{"reads share", []compat.Event{hold("base", "read", 10, 30, "n"), hold("head", "read", 20, 40, "n")},
			"", [2]string{"read", "read"}, "shared (1)"},
		{"permits within their limit", []compat.Event{permit("base", 2, 10, 30), permit("head", 3, 20, 40)},
			"", [2]string{"permits", "permits"}, "shared (1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := compat.Check("base", "head", c.events)
			got := strings.Join(r.Problems, "\n")
			if c.problem == "" && got != "" || c.problem != "" && !strings.Contains(got, c.problem) {
				t.Errorf("problems: %q, want one with %q", got, c.problem)
			}
			if c.result != "" && !strings.HasPrefix(r.Cells[c.cell].Result(), c.result) {
				t.Errorf("cell %v: %q, want %q", c.cell, r.Cells[c.cell].Result(), c.result)
			}
		})
	}
}

// The kinds to steer each worker to are those of the pairs not met, in the table's order: a run
// where every pair but lock×set and fair×read met steers the baseline to lock and fair, HEAD to
// read and set.
func TestUnmetKinds_areThoseOfThePairsNotMet(t *testing.T) {
	var events []compat.Event
	var at int64 = 10
	for _, b := range compat.Kinds {
		for _, h := range compat.Kinds {
			if b == "lock" && h == "set" || b == "fair" && h == "read" {
				continue
			}
			// A baseline hold, then a HEAD attempt that ran out waiting (or shared, for reads
			// and permits) during it.
			events = append(events, hold("base", b, at, at+5, "n"),
				compat.Event{Worker: "head", Kind: h, Names: []string{"n"}, Call: at + 1, Busy: true})
			if b == h && (b == "read" || b == "permits") {
				events[len(events)-1] = hold("head", h, at+1, at+4, "n")
				events[len(events)-1].Limit, events[len(events)-2].Limit = 3, 3
			}
			at += 10
		}
	}
	r := compat.Check("base", "head", events)
	if u := r.Unmet(); strings.Join(u, " ") != "lock×set fair×read" {
		t.Fatalf("unmet %v, want lock×set fair×read\n%s", u, r.Table())
	}
	base, head := r.UnmetKinds()
	if strings.Join(base, ",") != "lock,fair" || strings.Join(head, ",") != "read,set" {
		t.Errorf("steer the baseline to %v and HEAD to %v, want [lock fair] and [read set]", base, head)
	}
	if len(r.Problems) > 0 {
		t.Errorf("problems in a sound history: %v", r.Problems)
	}
}
