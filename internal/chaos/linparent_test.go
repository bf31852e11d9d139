package chaos_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/redistest"
)

// lockModel is a lock with an owner: the state is the owner's token, "" when free. Operations whose
// outcome is unknown may or may not have happened.
var lockModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byName := map[string][]porcupine.Operation{}
		for _, op := range h {
			n := op.Input.(linEvent).Name
			byName[n] = append(byName[n], op)
		}
		var out [][]porcupine.Operation
		for _, p := range byName {
			out = append(out, p)
		}
		return out
	},
	Init: func() []any { return []any{""} },
	Step: func(state, input, output any) []any {
		s, ev := state.(string), input.(linEvent)
		switch ev.Kind + "/" + output.(string) {
		case "acq/ok":
			if s == "" {
				return []any{ev.Tok}
			}
		case "acq/busy":
			if s != "" {
				return []any{s}
			}
		case "acq/unknown":
			if s == "" {
				return []any{"", ev.Tok}
			}
			return []any{s}
		case "rel/ok":
			if s == ev.Tok {
				return []any{""}
			}
		case "rel/notheld":
			if s != ev.Tok {
				return []any{s}
			}
		case "rel/unknown":
			if s == ev.Tok {
				return []any{s, ""}
			}
			return []any{s}
		case "exp/", "exp/lost", "exp/notheld": // the key expired: a no-op unless this token held it
			if s == ev.Tok {
				return []any{""}
			}
			return []any{s}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		ev := input.(linEvent)
		return fmt.Sprintf("%s(%d, %.6s) -> %s", ev.Kind, ev.Client, ev.Tok, output)
	},
}

type faultMark struct {
	proc int // the child whose proxy it hit; -1: the Redis server itself
	at   time.Time
}

// runLinearizability: several child processes, each with several clients going through its own
// toxiproxy, take and release one lock while faults hit one process's network or pause Redis; the
// recorded history must be linearizable for a lock with an owner, and fences must follow real time.
func runLinearizability(t *testing.T, rep *chaos.Report) {
	procs, clients := pick(3, 4), pick(2, 3)
	dur := time.Duration(pick(8, 60)) * time.Second
	const ttl = time.Second
	row := rep.Row(fmt.Sprintf("linearizability: %d processes × %d clients, porcupine", procs, clients))
	srv := redistest.Start(t)
	var kids []*child
	var pxs []*chaos.Proxy
	var outs []func() []string
	for p := range procs {
		px := chaos.NewProxy(t, srv.Addr())
		cfg := linConfig{Proc: p, Clients: clients, Dur: dur, TTL: ttl}
		k := startChild(t, "lin", "LOCKKIT_CHAOS_REDIS="+px.Addr(), "LOCKKIT_CHAOS_LIN="+cfg.String())
		kids, pxs, outs = append(kids, k), append(pxs, px), append(outs, k.collect())
	}
	var faults []faultMark
	end := time.Now().Add(dur)
	for time.Now().Add(3 * ttl).Before(end) {
		time.Sleep(between(ttl/2, 2*ttl)) // quiet time between faults
		d := between(ttl/4, 2*ttl)
		p := rand.N(procs)
		var err error
		switch rand.N(5) {
		case 0:
			err = pxs[p].Latency(between(ttl/10, ttl*3/2), ttl/20)
		case 1:
			err = pxs[p].Blackhole(d)
		case 2:
			err = pxs[p].Reset()
		default:
			if rand.N(2) == 0 {
				p = -1
				srv.Pause(t)
			} else {
				err = pxs[p].Blackhole(0)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		faults = append(faults, faultMark{proc: p, at: time.Now()})
		time.Sleep(d) // the fault lasts d
		if p < 0 {
			srv.Resume(t)
		} else {
			pxs[p].Clear()
		}
	}
	row.Faults(len(faults))
	var evs []linEvent
	var late time.Duration // the worst timer lateness of any child
	for p, k := range kids {
		k.wait(t, dur+30*time.Second)
		for _, line := range outs[p]() {
			if d, ok := parseLate(line); ok {
				late = max(late, d)
				continue
			}
			ev, ok := parseLinEvent(line)
			if !ok {
				t.Fatalf("child %d: bad line %q", p, line)
			}
			evs = append(evs, ev)
		}
	}
	acquired := 0
	for _, ev := range evs {
		if ev.Kind == "acq" && ev.Out == "ok" {
			acquired++
		}
	}
	if acquired < 10 {
		t.Fatalf("only %d acquisitions in the history", acquired)
	}
	checkLinHistory(t, row, evs, faults, late, time.Duration(pick(30, 120))*time.Second, linDrift(ttl))
}

// linT is the part of testing.TB that checkLinHistory uses.
type linT interface {
	chaos.Reporter
	Logf(format string, args ...any)
}

// linDrift is the lin children's safety margin: core's default drift for ttl.
func linDrift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// checkLinHistory checks a lin history twice:
//
//   - as Redis saw it: a lock leaves Redis no earlier than TTL after the last script that set its
//     expiry was sent. Not linearizable: a violation, always.
//   - as its holders saw it (holderView): neither before its holder stopped using it. Not
//     linearizable while Redis's view is: a holder went on after its lock could have expired, and
//     another client took it. That is what the drift guards against, and it cannot when the holder's
//     own timers run later than the drift: then the bounded run reports it as inconclusive.
func checkLinHistory(t linT, row *chaos.Row, evs []linEvent, faults []faultMark, late time.Duration, timeout, drift time.Duration) {
	t.Helper()
	var redisView, holderView []porcupine.Operation
	var acqs []linEvent
	unknown := 0
	for _, ev := range evs {
		switch {
		case ev.Out == "unknown":
			unknown++
		case ev.Kind == "acq" && ev.Out == "ok":
			acqs = append(acqs, ev)
		}
		if ev.Kind == "exp" && ev.Call > ev.Ret {
			row.Violation(t, "client %d: lock %s (token %.6s) was gone from Redis %v before it could have expired",
				ev.Client, ev.Name, ev.Tok, time.Duration(ev.Call-ev.Ret)*time.Microsecond)
			ev.Call = ev.Ret
		}
		if ev.Kind == "exp" && ev.Out != "" { // the lock expired while held (lost, or gone at Release)
			margin := time.Duration(ev.Call-ev.Live) * time.Microsecond
			row.Margin(margin)
			switch {
			case margin > 0:
			case !full() && late > drift:
				t.Logf("inconclusive: client %d used lock %s until %v after it could have expired, while the children's timers ran up to %v late (drift %v)",
					ev.Client, ev.Name, -margin, late, drift)
			default:
				row.Violation(t, "client %d used lock %s until %v after it could have expired (timers up to %v late, drift %v)",
					ev.Client, ev.Name, -margin, late, drift)
			}
			if ev.Out == "lost" {
				if d, ok := sinceFault(faults, ev.Client/100, time.UnixMicro(ev.Live)); ok {
					row.Detection(d)
				}
			}
		}
		rv := ev
		if ev.GiveBack != 0 { // (an expired lock's give-back may take it out of Redis from then on)
			rv.Call = min(ev.Call, ev.GiveBack)
		}
		redisView = append(redisView, porcupine.Operation{ClientId: ev.Client, Input: rv, Call: rv.Call, Output: rv.Out, Return: rv.Ret})
		hv := rv
		hv.Call = min(max(rv.Call, ev.Live), ev.Ret)
		holderView = append(holderView, porcupine.Operation{ClientId: ev.Client, Input: hv, Call: hv.Call, Output: hv.Out, Return: hv.Ret})
	}
	row.Ops(len(evs))
	checkFenceOrder(t, row, acqs)
	for _, v := range []struct {
		name string
		h    []porcupine.Operation
	}{{"Redis's view", redisView}, {"the holders' view", holderView}} {
		start := time.Now()
		res, info := porcupine.CheckOperationsVerbose(lockModel.ToModel(), v.h, timeout)
		t.Logf("%s: %d operations (%d acquisitions, %d of unknown outcome), %d faults, timers up to %v late: porcupine %s in %v",
			v.name, len(v.h), len(acqs), unknown, len(faults), late, res, time.Since(start))
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			t.Errorf("porcupine timed out on %s (history in %s)", v.name, linArtifacts(t, v.h, info, false))
		case porcupine.Illegal:
			dir := linArtifacts(t, v.h, info, true)
			if v.name == "the holders' view" && !full() && late > drift {
				t.Logf("inconclusive: %s is not linearizable, but the children's timers ran up to %v late, more than the drift (%v) (history in %s)", v.name, late, drift, dir)
				continue
			}
			row.Violation(t, "%s is not linearizable (visualization and history in %s)", v.name, dir)
		}
		return // the holders' view adds nothing to a broken Redis view
	}
}

// linArtifacts saves a history (and porcupine's visualization of it) where a developer can look
// at it after the test: in LOCKKIT_CHAOS_ARTIFACTS, or a new temporary directory that is kept.
func linArtifacts(t linT, h []porcupine.Operation, info porcupine.LinearizationInfo, visualize bool) string {
	dir := os.Getenv("LOCKKIT_CHAOS_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "lockkit-lin-"); err != nil {
			t.Logf("saving the history: %v", err)
			return "(not saved)"
		}
	}
	if visualize {
		_ = porcupine.VisualizePath(lockModel.ToModel(), info, filepath.Join(dir, "history.html"))
	}
	dumpHistory(filepath.Join(dir, "history.jsonl"), h)
	return dir
}

// sinceFault returns how long after the latest fault that could have hit process proc the time at
// lies (the detection latency of a loss at that time).
func sinceFault(faults []faultMark, proc int, at time.Time) (time.Duration, bool) {
	for i := len(faults) - 1; i >= 0; i-- {
		f := faults[i]
		if (f.proc == proc || f.proc < 0) && !f.at.After(at) {
			return at.Sub(f.at), true
		}
	}
	return 0, false
}

// checkFenceOrder: of two acquisitions of a lock, the one that returned before the other was called
// has the lower fence.
func checkFenceOrder(t chaos.Reporter, row *chaos.Row, acqs []linEvent) {
	byName := map[string][]linEvent{}
	for _, a := range acqs {
		byName[a.Name] = append(byName[a.Name], a)
	}
	for _, as := range byName {
		checkFenceOrder1(t, row, as)
	}
}

func checkFenceOrder1(t chaos.Reporter, row *chaos.Row, acqs []linEvent) {
	byRet := slices.Clone(acqs)
	slices.SortFunc(byRet, func(a, b linEvent) int { return int(a.Ret - b.Ret) })
	byCall := slices.Clone(acqs)
	slices.SortFunc(byCall, func(a, b linEvent) int { return int(a.Call - b.Call) })
	var maxBefore int64
	i := 0
	for _, b := range byCall {
		for i < len(byRet) && byRet[i].Ret < b.Call {
			maxBefore = max(maxBefore, byRet[i].Fence)
			i++
		}
		if b.Fence <= maxBefore {
			row.Violation(t, "fence %d (client %d) not above %d, granted before it was asked for", b.Fence, b.Client, maxBefore)
		}
	}
}

// dumpHistory writes the operations, by call time, one JSON object a line.
func dumpHistory(path string, h []porcupine.Operation) {
	h = slices.Clone(h)
	slices.SortFunc(h, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	for _, op := range h {
		b, _ := json.Marshal(op.Input)
		fmt.Fprintf(f, "%s\n", b)
	}
}
