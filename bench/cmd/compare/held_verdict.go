package main

import (
	"fmt"
	"strings"
)

// heldTargets are issue #38's for holding many locks, on lockkit's row at the short TTL (100 000
// locks, 3 s): at most 3 µs of Redis CPU and 3 µs of client CPU per renewal, a foreground acquire
// and release beside the renewing locks within 2× their idle latency (p50 and p99; through the
// client that holds them, and through another), and at most 1 KiB of client memory (live heap
// + stacks) per held lock.
func heldTargets(s *store, want map[string]bool) []target {
	if !want["held"] {
		return nil
	}
	var ts []target
	for _, row := range s.rows["held"] {
		if !isHeldFast(row) {
			continue
		}
		ts = append(ts, bounds(s, "#38 Redis server CPU per renewal, µs, "+row, "held", row, "", "redis_us_renew", false, fixed(3))...)
		ts = append(ts, bounds(s, "#38 client CPU per renewal, µs, "+row, "held", row, "", "client_us_renew", false, fixed(3))...)
		for _, via := range []struct{ what, metric string }{{"their client", ""}, {"another client", "_other"}} {
			for _, f := range []struct{ what, metric string }{
				{"acquire p50", "fg_acq%s_p50_x"}, {"release p50", "fg_rel%s_p50_x"},
				{"acquire p99", "fg_acq%s_p99_x"}, {"release p99", "fg_rel%s_p99_x"},
			} {
				ts = append(ts, bounds(s, "#38 foreground "+f.what+" beside the held locks (through "+via.what+") ÷ idle, "+row,
					"held", row, "", fmt.Sprintf(f.metric, via.metric), false, fixed(2))...)
			}
		}
		// Live heap + stacks: HeapInuse's delta depends on the spans earlier measurements left partly used.
		ts = append(ts, bounds(s, "#38 client memory per held lock (live heap + stacks), B, "+row, "held", row, "", "mem_lock_b", false, fixed(1024))...)
	}
	return ts
}

// isHeldFast tells lockkit's row at the short TTL (heldFastName).
func isHeldFast(row string) bool {
	return strings.HasPrefix(row, "lockkit (") && strings.HasSuffix(row, " TTL)")
}

// heldTargetsText states heldTargets for the verdict.
const heldTargetsText = "#38, holding many locks (lockkit's row at the short TTL): at most 3 µs of Redis CPU and 3 µs of client CPU per renewal, " +
	"a foreground acquire and release beside the renewing locks within 2× their idle latency (p50 and p99, through the client that holds them and through another), and at most 1 KiB of client memory (live heap + goroutine stacks, after GC) per held lock. "
