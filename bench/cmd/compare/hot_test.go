package main

import (
	"strings"
	"testing"
	"time"
)

func TestHotMetrics_handoffsFollowTheLockOrder(t *testing.T) {
	ms := time.Millisecond
	run := &hotRun{
		// Recorded out of order; seq gives the order in which the lock was held.
		recs: []csRec{
			{seq: 3, worker: 2, t0: 0, t1: 9 * ms, t2: 10 * ms},
			{seq: 1, worker: 1, t0: 0, t1: 1 * ms, t2: 3 * ms},
			{seq: 2, worker: 1, t0: 3 * ms, t1: 4 * ms, t2: 8 * ms},
			// acquired before the previous holder's release returned: handoff clamps to 0
			{seq: 4, worker: 1, t0: 8 * ms, t1: 9*ms + 500*time.Microsecond, t2: 12 * ms},
		},
		cut:     []time.Duration{100 * ms},
		elapsed: time.Second,
	}
	m, err := hotMetrics(run, usage{top: 8, inner: 4, trips: 8, cpu: 40})
	if err != nil {
		t.Fatal(err)
	}
	// handoffs: 4-3=1ms, 9-8=1ms, 9.5-10 → 0
	if m["handoff_p50_us"] != 1000 || m["handoff_p99_us"] != 1000 {
		t.Errorf("handoffs p50 %v p99 %v, want 1000 µs", m["handoff_p50_us"], m["handoff_p99_us"])
	}
	// waits: 1, 1, 9, 1.5 ms and the cut 100 ms wait
	if m["wait_max_ms"] != 100 || m["wait_p50_ms"] != 1.5 {
		t.Errorf("wait max %v p50 %v, want 100 and 1.5", m["wait_max_ms"], m["wait_p50_ms"])
	}
	// holders in lock order: 1 1 2 1 → one repeat of three transitions
	if got := m["same_pct"]; got < 33.3 || got > 33.4 {
		t.Errorf("same holder = %v %%, want 33.3", got)
	}
	if m["busiest_pct"] != 75 || m["cut"] != 1 || m["cs_s"] != 4 {
		t.Errorf("busiest %v cut %v cs/s %v", m["busiest_pct"], m["cut"], m["cs_s"])
	}
	if m["top_cs"] != 2 || m["inner_cs"] != 1 || m["total_cs"] != 3 || m["cpu_cs_us"] != 10 {
		t.Errorf("costs: %v", m)
	}
}

func TestHotMetrics_rejectsOverlapsAndEmptyRuns(t *testing.T) {
	recs := []csRec{{seq: 1}, {seq: 2}}
	if _, err := hotMetrics(&hotRun{recs: recs, overlaps: 1, elapsed: time.Second}, usage{}); err == nil ||
		!strings.Contains(err.Error(), "mutual exclusion") {
		t.Errorf("overlap not reported: %v", err)
	}
	if _, err := hotMetrics(&hotRun{recs: recs[:1], elapsed: time.Second}, usage{}); err == nil {
		t.Error("a run with one critical section was accepted")
	}
}
