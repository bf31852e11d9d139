package chaos_test

import (
	"fmt"
	"strings"
	"time"
)

// The election variant's observer oracle. What Observe promises (election/observe.go, issue #27):
// it reports leaders in term order — never an older term after a newer one; a vacancy (the zero
// Leader) is not a term, so it resets nothing — and each report names a leader that campaigned with
// that value and got that fence. The stronger promises of the fixed Observe — every proclaimed
// term while its subscription is healthy, no term twice, and a vacancy only once the term reported
// before it has ended — are checked when asked for
// (LOCKKIT_SAFETY_OBSERVE_EVERY=1, or =DURATION: only terms that lasted that long must be
// reported); otherwise the terms an observer did not report while it was observing, and those
// it reported again after a vacancy, are counted.

// minObservedTerm is the shortest term an observer with a healthy path must report (when asked
// to): a few of the slowest observer's round trips.
const minObservedTerm = 25 * time.Millisecond

// observeStats counts, per observer, what it reported.
type observeStats struct {
	names                                                    []string
	minTerm                                                  time.Duration
	reports, vacancies, older, repeats, skipped, long, sound []int
	terms                                                    int
}

func (s observeStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d terms", s.terms)
	for i, n := range s.names {
		fmt.Fprintf(&b, "; observer %s: %d reports (%d vacancies), %d name an older term after a newer one, %d repeat a term after a vacancy, %d terms not reported (%d of them lasting %v or more, %d of those while its path was healthy)",
			n, s.reports[i], s.vacancies[i], s.older[i], s.repeats[i], s.skipped[i], s.long[i], s.minTerm, s.sound[i])
	}
	return b.String()
}

// checkObserve checks the observers' reports against the campaigns. Observer j's commands and
// faults are on history target targets[j]. every makes a term of minTerm or more skipped on a healthy
// path, and a term reported again after a vacancy, a violation.
func checkObserve(r run, cps []*campaign, reps []observerReport, targets []int, every bool, minTerm time.Duration) ([]verdict, observeStats) {
	o := newOracle(r)
	byValue := map[string]*campaign{}
	byFence := map[int64]*hold{}
	for _, cp := range cps {
		byValue[cp.Value] = cp
		if h := o.byID[cp.Hold]; h != nil {
			byFence[h.Fence] = h
		}
	}
	n := len(observerNames)
	st := observeStats{names: observerNames, minTerm: minTerm, reports: make([]int, n), vacancies: make([]int, n), older: make([]int, n),
		repeats: make([]int, n), skipped: make([]int, n), long: make([]int, n), sound: make([]int, n)}
	for _, cp := range cps {
		if cp.Hold > 0 {
			st.terms++
		}
	}
	ids := func(fs ...int64) []int {
		var out []int
		for _, f := range fs {
			if h := byFence[f]; h != nil {
				out = append(out, h.ID)
			}
		}
		return out
	}
	for j, name := range observerNames {
		var mine []observerReport
		for _, rp := range reps {
			if rp.Observer == j {
				mine = append(mine, rp)
			}
		}
		st.reports[j] = len(mine)
		if len(mine) == 0 {
			continue
		}
		reported := map[int64]bool{}
		var newest int64
		vacant := false
		for _, rp := range mine {
			if rp.Fence == 0 {
				st.vacancies[j]++
				vacant = true
				// The read that showed the vacancy came before the report: the term reported last
				// must have ended by then (its Term.Context live after it means its lock was live),
				// unless something hit the server meanwhile (a key lost behind lockkit's back ends a
				// term in Redis before its leader hears of it).
				if h := byFence[newest]; every && h != nil && h.Live > rp.At+o.slack(rp.At-time.Second, h.Live) && !o.serverFault(h.Ret, rp.At) {
					o.flag("observe-vacancy", rp.At, []int{h.ID}, "observer %s reported a vacancy while the term with fence %d it reported last was live %v longer",
						name, newest, ms(h.Live-rp.At))
				}
				continue
			}
			reported[rp.Fence] = true
			switch cp := byValue[rp.Value]; {
			case cp == nil:
				o.flag("observe-unknown", rp.At, nil, "observer %s reported a leader with value %q (fence %d) that no campaign used", name, rp.Value, rp.Fence)
			case cp.Hold > 0 && o.byID[cp.Hold].Fence != rp.Fence:
				o.flag("observe-mismatch", rp.At, ids(rp.Fence), "observer %s reported leader %q with fence %d; its term has fence %d", name, rp.Value, rp.Fence, o.byID[cp.Hold].Fence)
			}
			switch {
			case rp.Fence < newest:
				st.older[j]++
				o.flag("observe-order", rp.At, ids(newest, rp.Fence), "observer %s reported the term with fence %d (%s) after the newer one with fence %d",
					name, rp.Fence, rp.Value, newest)
			case rp.Fence == newest && vacant:
				st.repeats[j]++
				if every {
					o.flag("observe-repeat", rp.At, ids(rp.Fence), "observer %s reported the term with fence %d (%s) again after a vacancy", name, rp.Fence, rp.Value)
				}
			}
			newest, vacant = max(newest, rp.Fence), false
		}
		// Terms that began after its first report and ended before its last one; one is skipped
		// on a healthy path if the path had nothing wrong from a second before it (a subscription
		// a fault broke may take that long to come back) until 100 ms after.
		from, to := mine[0].At, mine[len(mine)-1].At
		for _, cp := range cps {
			h := o.byID[cp.Hold]
			if h == nil || reported[h.Fence] || h.Ret <= from {
				continue
			}
			end := h.End
			if cp.Resigned > 0 && (end == 0 || cp.Resigned < end) {
				end = cp.Resigned
			}
			if end == 0 || end >= to {
				continue
			}
			st.skipped[j]++
			if end-h.Ret < minTerm {
				continue
			}
			st.long[j]++
			if !o.healthy(targets[j], h.Ret-time.Second, end+100*time.Millisecond, slowCmd) {
				continue
			}
			st.sound[j]++
			if every {
				o.flag("observe-skipped", end, []int{h.ID}, "observer %s never reported the term with fence %d (%s), visible %v..%v, while its path was healthy",
					name, h.Fence, cp.Value, ms(h.Ret), ms(end))
			}
		}
	}
	return o.bad, st
}

// serverFault reports whether a fault that hits every path (a paused server, a key loss) overlapped
// [from, to].
func (o *oracle) serverFault(from, to time.Duration) bool {
	for _, f := range o.faults {
		if f.Target < 0 && f.From < to && f.To > from {
			return true
		}
	}
	return false
}
