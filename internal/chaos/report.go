package chaos

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Report collects one Row per scenario of a run and renders them as a markdown table.
type Report struct {
	mu   sync.Mutex
	rows []*Row
}

// Row is the tally of one scenario. Its methods are safe for concurrent use.
type Row struct {
	Scenario string

	mu         sync.Mutex
	ops        int
	faults     int
	violations int
	detect     []time.Duration
	margins    []time.Duration
}

// Row adds a row for scenario and returns it.
func (r *Report) Row(scenario string) *Row {
	r.mu.Lock()
	defer r.mu.Unlock()
	row := &Row{Scenario: scenario}
	r.rows = append(r.rows, row)
	return row
}

// Ops counts n operations (acquisitions, critical sections, writes: each scenario says which).
func (w *Row) Ops(n int) { w.mu.Lock(); w.ops += n; w.mu.Unlock() }

// Faults counts n injected faults.
func (w *Row) Faults(n int) { w.mu.Lock(); w.faults += n; w.mu.Unlock() }

// Reporter is the part of testing.TB that Violation uses.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// Violation counts a safety violation and fails the test with the message.
func (w *Row) Violation(t Reporter, format string, args ...any) {
	t.Helper()
	w.mu.Lock()
	w.violations++
	w.mu.Unlock()
	t.Errorf("VIOLATION in %s: "+format, append([]any{w.Scenario}, args...)...)
}

// Detection records a detection latency.
func (w *Row) Detection(d time.Duration) { w.mu.Lock(); w.detect = append(w.detect, d); w.mu.Unlock() }

// Margin records a safety margin (how long before another client could have the lock the holder
// stopped); a margin <= 0 must also be reported as a Violation.
func (w *Row) Margin(d time.Duration) { w.mu.Lock(); w.margins = append(w.margins, d); w.mu.Unlock() }

// Counts returns the operations, faults and violations so far.
func (w *Row) Counts() (ops, faults, violations int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ops, w.faults, w.violations
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of ds, and false if ds is empty.
func Percentile(ds []time.Duration, p float64) (time.Duration, bool) {
	if len(ds) == 0 {
		return 0, false
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)], true
}

func fmtDur(d time.Duration, ok bool) string {
	if !ok {
		return "–"
	}
	switch {
	case d.Abs() >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d.Abs() >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
}

// Event is a moment a report line tells of: what happened, and when.
type Event struct {
	What string
	At   time.Time
}

// InOrder tells of events in the order they happened, each but the first with how long after the
// one before: "A, then 169µs later B, then 344ms later C". Its durations are never negative.
func InOrder(evs ...Event) string {
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, func(a, b Event) int { return a.At.Compare(b.At) })
	var b strings.Builder
	for i, e := range evs {
		switch gap := e.At.Sub(evs[max(i-1, 0)].At); {
		case i == 0:
		case gap == 0:
			b.WriteString(", then at the same moment ")
		default:
			fmt.Fprintf(&b, ", then %v later ", Gap(gap))
		}
		b.WriteString(e.What)
	}
	return b.String()
}

// Gap rounds a duration for a report line: to the microsecond below a millisecond, else to 0.1 ms.
func Gap(d time.Duration) time.Duration {
	if d.Abs() < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}

// Markdown renders the rows, in the order they were added.
func (r *Report) Markdown() string {
	r.mu.Lock()
	rows := slices.Clone(r.rows)
	r.mu.Unlock()
	var b strings.Builder
	b.WriteString("| scenario | operations | faults | violations | detection p50 | detection p99 | margin min |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range rows {
		w.mu.Lock()
		p50, ok50 := Percentile(w.detect, 50)
		p99, ok99 := Percentile(w.detect, 99)
		mmin, okm := Percentile(w.margins, 0.000001)
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s | %s |\n", w.Scenario, w.ops, w.faults, w.violations,
			fmtDur(p50, ok50), fmtDur(p99, ok99), fmtDur(mmin, okm))
		w.mu.Unlock()
	}
	return b.String()
}
