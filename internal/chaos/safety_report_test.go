package chaos_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/chaos"
)

// lossRows adds the report's rows for the operations and faults of issue #27 in one variant's run:
// the operator's ForceRelease, the key losses (DEL, FLUSHALL, restart), holds with a maximum hold
// and waiters that gave up. Each counts its operations and faults and the violations tied to it
// (verdict.Fault); the variant's own row counts every violation.
func lossRows(t *testing.T, rep *chaos.Report, name string, h *history, r run, bad []verdict) {
	t.Helper()
	h.mu.Lock()
	counts := map[string]int{}
	for k, v := range h.counts {
		counts[k] = v
	}
	h.mu.Unlock()
	faults := map[string]int{}
	for _, f := range r.faults {
		faults[f.Kind]++
	}
	limited, ended, fairShort := 0, 0, 0
	for _, x := range r.holds {
		if x.MaxHold > 0 {
			limited++
		}
		if x.Cause == "maxhold" {
			ended++
		}
		if x.Fair && x.Queue > 0 && x.TTL > x.Queue {
			fairShort++
		}
	}
	tied := map[string]int{}
	for _, v := range bad {
		tied[v.Fault]++
	}
	add := func(what string, ops, nfaults int, kinds ...string) {
		if ops == 0 && nfaults == 0 {
			return // not in this variant (WithToken on permits)
		}
		row := rep.Row(fmt.Sprintf("safety checker, %s: %s", name, what))
		row.Ops(ops)
		row.Faults(nfaults)
		for _, k := range kinds {
			for range tied[k] {
				row.Violation(countOnly{}, "")
			}
		}
	}
	add(fmt.Sprintf("ForceRelease by an operator (%d deleted a hold)", counts["force-deleted"]), counts["force"], faults["force"], "force")
	add(fmt.Sprintf("key loss: DEL %d, FLUSHALL %d, restart %d", faults["del"], faults["flushall"], faults["restart"]), 0,
		faults["del"]+faults["flushall"]+faults["restart"], "del", "flushall", "restart")
	add(fmt.Sprintf("max hold: %d holds with a limit, %d ended by it", limited, ended), counts["maxhold"], 0, "maxhold")
	add(fmt.Sprintf("waiters that give up (%d got the lock)", counts["giveup-acquired"]), counts["giveup"], 0)
	add(fmt.Sprintf("WithToken under another hold's token (%d took the lock afresh)", counts["token-fresh"]), counts["token"], 0)
	t.Logf("%s: ForceRelease %d (deleted %d), key losses %v, max hold ops %d (holds with a limit %d, ended by it %d, Redis checked after %d), give-ups %d (acquired %d), WithToken %d (fresh %d), fair holds with a TTL above the queue timeout %d, re-entries skipped after a loss %d",
		name, counts["force"], counts["force-deleted"], lossCounts(faults), counts["maxhold"], limited, ended, counts["maxhold-ended"],
		counts["giveup"], counts["giveup-acquired"], counts["token"], counts["token-fresh"], fairShort, counts["reentry-skipped"])
}

func lossCounts(faults map[string]int) string {
	var parts []string
	for _, k := range []string{"del", "flushall", "restart"} {
		parts = append(parts, fmt.Sprintf("%s=%d", k, faults[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// countOnly is a chaos.Reporter that only lets a row count a violation already reported on its
// variant's row.
type countOnly struct{}

func (countOnly) Helper()               {}
func (countOnly) Errorf(string, ...any) {}
