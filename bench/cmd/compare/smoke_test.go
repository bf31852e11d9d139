package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// A whole round of every scenario at toy sizes, and the report it makes.
func TestHarness_roundAndReport(t *testing.T) {
	ss := testServers(t, 3)
	ctx := testCtx(t)
	p := fullParams()
	// Hot windows long enough for redsync's defaults (50–250 ms retry delay) to complete critical sections.
	p.window, p.hotWindow, p.sweepWindow, p.warm = 50*time.Millisecond, 400*time.Millisecond, 300*time.Millisecond, 20*time.Millisecond
	p.goroutines, p.redlockG, p.holds = []int{2}, []int{2}, []time.Duration{time.Millisecond}
	p.heldN, p.heldTTL, p.observe = 300, 3*time.Second, 2400*time.Millisecond // a first half (the costs) past the first renewals
	p.heldFastTTL, p.heldFastObserve, p.fgIdle = 3*time.Second, 2400*time.Millisecond, 200*time.Millisecond
	want, err := parseOnly("")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	h := &harness{start: time.Now(), servers: ss, p: p, res: newStore(), log: &logs}
	if err := h.round(ctx, 0, 1, want); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "ERROR") {
		t.Fatalf("a measurement failed:\n%s", logs.String())
	}
	if got := h.res.get("held", "300 locks", "lockkit", "lost"); got.n != 1 || got.med != 0 {
		t.Errorf("lockkit lost %+v held locks", got)
	}
	// One goroutine per lock (a process-wide count: a few of the harness's may end meanwhile).
	if got := h.res.get("held", "300 locks", "redislock + DIY ticker", "goroutines"); got.med < 0.95*300 {
		t.Errorf("DIY ticker added %v goroutines for 300 locks", got.med)
	}
	if got := h.res.get("held", "300 locks", "lockkit", "trips_int"); got.med <= 0 {
		t.Errorf("no lockkit renewal seen in %v", p.observe)
	}
	for _, metric := range []string{"redis_us_renew", "client_us_renew", "fg_acq_p50_x", "fg_rel_p99_x", "fg_acq_other_p50_x", "heap_inuse_lock_b"} {
		if got := h.res.get("held", "300 locks", heldFastName(p), metric); got.n != 1 || got.med <= 0 {
			t.Errorf("%s: %s %+v", heldFastName(p), metric, got)
		}
	}
	for _, metric := range []string{"stall_idle_ms", "stall_ms"} { // (0 when no command took 1 ms)
		if got := h.res.get("held", "300 locks", heldFastName(p), metric); got.n != 1 || got.med < 0 {
			t.Errorf("%s: %s %+v", heldFastName(p), metric, got)
		}
	}
	m := collectMachine("redis-server", []string{"-quick"})
	m.finish()
	var out bytes.Buffer
	if err := writeReport(&out, h, m, 1, want); err != nil {
		t.Fatal(err)
	}
	doc := out.String()
	for _, s := range []string{"cd bench && go run ./cmd/compare -quick", "## Verdict", "## Uncontended", "| 2 | lockkit |",
		"## One hot key", "| 1 ms | redislock (tuned) |", "| 1 ms | lockkit fair |",
		"| 2 | raw floor (auto-pipelined) |", "| 2 | raw floor (coalesced when busy) |", "| 2 | lockkit (pipelined) |", "| 2 | lockkit (pipelined, 2) |",
		"| 1 ms | lockkit (pipelined) |", "| 1 ms | lockkit fair (pipelined) |",
		"| 1 ms | lockkit Redlock (pipelined) |", "ops/s vs auto-pipelined floor", "The targets (issue #22", "## Redlock over 3 nodes", "| 1 ms | lockkit Redlock |",
		"## Many held locks", "redislock + DIY ticker", "cost per renewal, and a foreground lock beside them", "Redis's longest O(1) command", "| 300 locks | lockkit (3s TTL) |", "## How the tuned settings were chosen", "Redis server v="} {
		if !strings.Contains(doc, s) {
			t.Errorf("report lacks %q", s)
		}
	}
	if t.Failed() {
		t.Log(doc)
	}
}

func TestRun_rejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-rounds", "0"}, {"-only", "nope"}, {"stray"}} {
		if err := run(args, io.Discard); err == nil {
			t.Errorf("run(%q) accepted", args)
		}
	}
}

// The read-mostly scenario at toy sizes: it is one of make bench-compare's default scenarios (issue
// #30 asks for its rows there), and its table compares the read-write lock with the plain lock.
func TestHarness_readMostly(t *testing.T) {
	ss := testServers(t, 1)
	ctx := testCtx(t)
	p := fullParams()
	p.hotWindow, p.warm, p.sweep = 500*time.Millisecond, 20*time.Millisecond, false
	want, err := parseOnly("rw")
	if err != nil {
		t.Fatal(err)
	}
	if all, _ := parseOnly(""); !all["rw"] {
		t.Error("the read-mostly scenario does not run by default")
	}
	var logs bytes.Buffer
	h := &harness{start: time.Now(), servers: ss, p: p, res: newStore(), log: &logs}
	if err := h.round(ctx, 0, 1, want); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "ERROR") {
		t.Fatalf("a measurement failed:\n%s", logs.String())
	}
	rw, lock := h.res.get("rw", "8", "lockkit read-write", "reads_s"), h.res.get("rw", "8", "lockkit lock", "reads_s")
	if rw.n != 1 || lock.n != 1 || rw.med <= lock.med {
		t.Errorf("reads/s: read-write %+v, lock %+v: readers did not share", rw, lock)
	}
	m := collectMachine("redis-server", []string{"-only", "rw"})
	m.finish()
	var out bytes.Buffer
	if err := writeReport(&out, h, m, 1, want); err != nil {
		t.Fatal(err)
	}
	if doc := out.String(); !strings.Contains(doc, "## Read-mostly") || !strings.Contains(doc, "| 8 | lockkit read-write |") {
		t.Errorf("report lacks the read-mostly table:\n%s", doc)
	}
}
