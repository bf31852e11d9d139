package chaos_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The safety oracle: pure checks of a recorded history (see safety_history_test.go). Each check is
// sound — it flags only what a correct lock cannot do — so it reasons with bounds: a hold's Sent is
// no later than the send of the attempt that took the lock, its Ret no earlier than the return, its
// Live a moment its context was certainly live. Where the only explanation left is this process
// being starved (its timers ran late), the finding is inconclusive, not a violation.

// verdict is one finding of the oracle.
type verdict struct {
	Prop  string        // overlap, fence, reentry-fence, reentry-not-held, reentry-after-loss, loss-while-healthy, do-lost, orphan, no-ttl, panic, not-cancelled, loss-late, maxhold-late, maxhold-early, maxhold-not-released; permits: over-limit, lease-count, lease-gone
	At    time.Duration // when it happened (for the excerpt)
	Msg   string
	Holds []int  // the holds involved (IDs)
	Fault string // the key loss kind or operation it is tied to ("maxhold"), if any (the report's rows)
}

// run is what the oracle checks.
type run struct {
	holds              []hold
	fails              []failed
	faults, slow, late []span
	noTTL              map[string]time.Duration
	panics             []span
	permits            []permitSnap // semaphore scenario (see checkPermits)
	redlock            bool
	sched              []span          // the scheduler's worst goroutine wait per interval (see schedSlack)
	releaseErr         map[string]bool // tokens a release was sent for that failed (see orphans)
}

type oracle struct {
	run
	byID map[int]*hold
	bad  []verdict // violations
	soft []verdict // inconclusive
	// mixed: the holds are of several kinds on one name (the mixed variant), so a loss of the
	// name's lock key (which holds the marks of its permits and read-write holds) frees every hold.
	mixed bool
}

// check runs every check and returns the violations and the inconclusive findings.
func check(r run) (violations, inconclusive []verdict) {
	o := newOracle(r)
	names, byName := o.byName()
	for _, n := range names {
		o.overlaps(byName[n])
		o.fences(byName[n])
	}
	return o.finish()
}

func newOracle(r run) *oracle {
	o := &oracle{run: r, byID: map[int]*hold{}}
	for i := range o.holds {
		o.byID[o.holds[i].ID] = &o.holds[i]
		o.mixed = o.mixed || o.holds[i].Mode != ""
	}
	return o
}

// byName returns the names held, sorted, and the holds of each.
func (o *oracle) byName() ([]string, map[string][]*hold) {
	byName := map[string][]*hold{}
	for i := range o.holds {
		h := &o.holds[i]
		byName[h.Name] = append(byName[h.Name], h)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range byName {
			if !yield(n) {
				return
			}
		}
	})
	return names, byName
}

// finish runs the checks common to locks and permits (losses, key losses, WithMaxHold, Do,
// cancellations, orphans, TTLs, panics) and returns the violations and the inconclusive findings,
// in time order.
func (o *oracle) finish() (violations, inconclusive []verdict) {
	for i := range o.holds {
		o.lossWhileHealthy(&o.holds[i])
		o.lossLate(&o.holds[i])
		o.maxHolds(&o.holds[i])
		o.doLost(&o.holds[i])
		if o.holds[i].End == 0 {
			o.flag("not-cancelled", o.holds[i].Ret, []int{o.holds[i].ID}, "the lock's context was never cancelled, not even by Client.Close")
		}
	}
	o.orphans()
	if len(o.noTTL) > 0 {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range o.noTTL {
				if !yield(k) {
					return
				}
			}
		})
		first := o.noTTL[keys[0]]
		for _, at := range o.noTTL {
			first = min(first, at)
		}
		more := ""
		if len(keys) > 10 {
			keys, more = keys[:10], fmt.Sprintf(" and %d more", len(keys)-10)
		}
		o.flag("no-ttl", first, nil, "%d key(s) without a TTL (PTTL -1): %s%s", len(o.noTTL), strings.Join(keys, ", "), more)
	}
	for _, p := range o.panics {
		o.flag("panic", p.From, nil, "%s", p.Detail)
	}
	byAt := func(a, b verdict) int { return cmp.Compare(a.At, b.At) }
	slices.SortStableFunc(o.bad, byAt)
	slices.SortStableFunc(o.soft, byAt)
	return o.bad, o.soft
}

func (o *oracle) flag(prop string, at time.Duration, holds []int, format string, args ...any) {
	o.bad = append(o.bad, verdict{Prop: prop, At: at, Holds: holds, Msg: fmt.Sprintf(format, args...)})
}

// overlaps: A's acquisition certainly took effect before B's (A returned before B's attempt was
// sent), and A's context was still live after B's acquisition returned: two owners at once. A
// margin within what this process's timer lateness explains is inconclusive.
//
// A key loss of the name (see lossExcuses) excuses it while A stays within its bound.
func (o *oracle) overlaps(hs []*hold) {
	for _, a := range hs {
		var first *hold
		for _, b := range hs {
			if a.Tok != b.Tok && a.Ret < b.Sent && a.Live > b.Ret && (first == nil || b.Ret < first.Ret) {
				if _, excused := o.lossExcuses(a, b.Ret); !excused {
					first = b
				}
			}
		}
		if first == nil {
			continue
		}
		b := first
		margin := a.Live - b.Ret
		v := verdict{Prop: "overlap", At: b.Ret, Holds: []int{a.ID, b.ID}, Msg: fmt.Sprintf(
			"%s: hold %d (fence %d) was live %v after hold %d of another owner (fence %d) was acquired",
			a.Name, a.ID, a.Fence, ms(margin), b.ID, b.Fence)}
		if l, ok := o.lossBefore(a.Name, "lock", a.Sent, b.Ret); ok {
			v.Fault = l.Kind
			v.Msg += fmt.Sprintf(", past its bound after %s at %v", lossName(l), ms(l.From))
		}
		if slack := o.slack(b.Ret-time.Second, a.Live); margin <= slack {
			v.Msg += fmt.Sprintf(" — within this process's timer lateness (%v)", ms(slack))
			o.soft = append(o.soft, v)
			continue
		}
		o.bad = append(o.bad, v)
	}
}

// fences: of two fresh acquisitions, the one that returned before the other was sent has the lower
// fence; a re-entry keeps the fence of the hold it entered.
//
// A fresh acquisition is the first hold (by return) with its token and fence and a hold count of
// 1: a re-entry can also answer 1 (a replayed WithOwner re-entry, after the owner released), but
// with the fence of the hold it entered. Or, when no hold of that token and fence answered 1, the
// first of them (by send) if a reply loss on its path let go-redis send it again: a replayed
// acquisition answers the holds its token has by then, more than 1 when a co-owner (WithOwner,
// WithToken) entered it in between.
func (o *oracle) fences(hs []*hold) {
	type tokFence struct {
		tok   string
		fence int64
	}
	first, firstSent := map[tokFence]*hold{}, map[tokFence]*hold{}
	took := map[tokFence]bool{} // a hold with this token and fence answered 1
	for _, b := range hs {
		k := tokFence{b.Tok, b.Fence}
		if first[k] == nil || b.Ret < first[k].Ret {
			first[k] = b
		}
		if firstSent[k] == nil || b.Sent < firstSent[k].Sent {
			firstSent[k] = b
		}
		if b.Holds == 1 {
			took[k] = true
		}
	}
	isFresh := func(b *hold) bool {
		k := tokFence{b.Tok, b.Fence}
		if took[k] {
			return b.Holds == 1 && first[k] == b
		}
		return firstSent[k] == b && (b.Kind == "owner" || b.Kind == "token") && o.replayed(b)
	}
	fresh := map[string][]int64{} // token -> its fresh holds' fences
	got := map[tokFence]bool{}    // an acquisition got this fence, whenever it returned
	for _, b := range hs {
		if isFresh(b) {
			fresh[b.Tok] = append(fresh[b.Tok], b.Fence)
			got[tokFence{b.Tok, b.Fence}] = true
		}
	}
	for _, b := range hs {
		if !isFresh(b) {
			continue
		}
		var worst *hold
		for _, a := range hs {
			if isFresh(a) && a.Ret < b.Sent && a.Fence >= b.Fence && (worst == nil || a.Fence > worst.Fence) && !o.fenceReset(a, b) {
				worst = a
			}
		}
		if worst != nil {
			o.flag("fence", b.Ret, []int{worst.ID, b.ID}, "%s: fence %d (hold %d) is not above fence %d (hold %d), which was granted before it was asked for",
				b.Name, b.Fence, b.ID, worst.Fence, worst.ID)
		}
	}
	for _, b := range hs {
		// A re-entry that found its token not holding the lock took it afresh: the lock was free
		// (or another owner's) while the hold it entered was live, and that hold stayed live.
		//
		// After a key loss of the acquisition it entered (ForceRelease, DEL, FLUSHALL, a restart),
		// the re-entry must fail: a re-entry never creates an acquisition (issue #27).
		if outer := o.byID[b.Outer]; b.Holds == 1 && outer != nil && outer.Tok == b.Tok && outer.Live > b.Ret {
			if l, ok := o.lossBefore(b.Name, "lock", outer.Sent, b.Ret); ok {
				o.bad = append(o.bad, verdict{Prop: "reentry-after-loss", At: b.Ret, Holds: []int{outer.ID, b.ID}, Fault: l.Kind, Msg: fmt.Sprintf(
					"%s: re-entry %d (%s) of hold %d after %s at %v took the lock afresh (holds 1, fence %d, the hold's %d) instead of failing, while hold %d stayed live %v longer",
					b.Name, b.ID, b.Kind, outer.ID, lossName(l), ms(l.From), b.Fence, outer.Fence, outer.ID, ms(outer.Live-b.Ret))})
				continue
			}
			o.flag("reentry-not-held", b.Ret, []int{outer.ID, b.ID}, "%s: re-entry %d (%s) found the lock not held by its token and took it afresh (fence %d), while hold %d of that token stayed live %v longer",
				b.Name, b.ID, b.Kind, b.Fence, outer.ID, ms(outer.Live-b.Ret))
		}
	}
	if o.redlock {
		return // a Redlock re-entry reads the counters of its quorum, which other attempts may have raised
	}
	for _, b := range hs {
		if b.Holds <= 1 {
			continue
		}
		switch outer := o.byID[b.Outer]; {
		case b.Kind == "ctx" && outer != nil && outer.Fence != b.Fence:
			o.flag("reentry-fence", b.Ret, []int{outer.ID, b.ID}, "%s: re-entry %d through hold %d's context has fence %d, the hold has %d",
				b.Name, b.ID, outer.ID, b.Fence, outer.Fence)
		case (b.Kind == "owner" || b.Kind == "token") && !took[tokFence{b.Tok, b.Fence}] && !got[tokFence{b.Tok, b.Fence}]:
			// (A WithOwner re-entry may return before the acquisition it entered does: two
			// clients' WithOwner calls after the owner released, before issue 27's fix.)
			o.flag("reentry-fence", b.Ret, []int{b.ID}, "%s: WithOwner re-entry %d has fence %d, which no acquisition of its token got (%v)",
				b.Name, b.ID, b.Fence, fresh[b.Tok])
		}
	}
}

// lossWhileHealthy: a lock reported lost while its client's path (its proxy, its Redis node) had no
// fault, no failed or slow command and no starved timer during the lock's TTL before the loss.
// Then every renewal was answered in time: a correct watchdog keeps the lock.
func (o *oracle) lossWhileHealthy(h *hold) {
	if h.LostAt == 0 {
		return
	}
	ttl, shortest := o.tokenTTL(h)
	from := h.LostAt - ttl - 100*time.Millisecond
	if from < 0 || !o.healthy(h.Client, from, h.LostAt, shortest/6) {
		return
	}
	if _, ok := o.lossBefore(h.Name, family(h), from, h.LostAt); ok {
		return // a key loss of its name: the loss is what the renewal reported
	}
	o.flag("loss-while-healthy", h.LostAt, []int{h.ID}, "%s: hold %d (TTL up to %v) reported lost (%s) while its client's path was healthy for %v before",
		h.Name, h.ID, ttl, h.Why, ms(h.LostAt-from))
}

// tokenTTL returns the longest and the shortest TTL any hold of h's token on h's client asked for
// (or Extend set) by the time h was lost: the healthy stretch must cover the longest, and its
// commands and timers must have been quick for the shortest (a lock shortened by Extend is renewed
// that much more often).
func (o *oracle) tokenTTL(h *hold) (longest, shortest time.Duration) {
	return o.tokenTTLAt(h, h.LostAt)
}

// tokenTTLAt is tokenTTL by the time at. A fair hold's grant may have had a first lease as short
// as its queue timeout, renewed that much sooner: it counts as its shortest.
func (o *oracle) tokenTTLAt(h *hold, at time.Duration) (longest, shortest time.Duration) {
	longest, shortest = h.TTL, h.TTL
	for i := range o.holds {
		x := &o.holds[i]
		if x.Tok != h.Tok || x.Client != h.Client || x.Name != h.Name || x.Call > at {
			continue
		}
		longest, shortest = max(longest, x.TTL), min(shortest, x.TTL)
		if x.Fair && x.Queue > 0 {
			shortest = min(shortest, x.Queue)
		}
		for _, e := range x.Extends {
			if e.At < at {
				longest, shortest = max(longest, e.TTL), min(shortest, e.TTL)
			}
		}
	}
	return longest, shortest
}

// healthy reports whether client's path had no fault, no failed command, no command slower than
// slow and no timer later than slow in [from, to]. A key loss of one name (ForceRelease, DEL) is no
// fault of the path; the callers weigh it for the names it hit.
func (o *oracle) healthy(client int, from, to, slow time.Duration) bool {
	for _, f := range o.faults {
		if onPath(f, client) && f.From < to && f.To > from && f.Name == "" {
			return false
		}
	}
	for _, s := range o.slow {
		if s.Target == client && s.From < to && s.To > from && (s.Kind == "error" || s.To-s.From > slow) {
			return false
		}
	}
	return max(o.lateness(from, to), o.schedLateness(from, to)) <= slow
}

func onPath(f span, client int) bool { return f.Target == client || f.Target < 0 }

// replayed reports whether a reply loss on h's path fell within its call: go-redis may have sent
// its acquisition again.
func (o *oracle) replayed(h *hold) bool {
	for _, f := range o.faults {
		if f.Kind == "replyloss" && onPath(f, h.Client) && f.From < h.Ret && f.To > h.Sent {
			return true
		}
	}
	return false
}

// lateness is the worst timer lateness the probe saw in [from, to].
func (o *oracle) lateness(from, to time.Duration) time.Duration {
	var worst time.Duration
	for _, l := range o.late {
		if l.From < to && l.To > from {
			worst = max(worst, time.Duration(l.Target)*time.Microsecond)
		}
	}
	return worst
}

// slack is how much of a margin this process's starvation explains in [from, to].
func (o *oracle) slack(from, to time.Duration) time.Duration {
	return 2*o.lateness(from, to) + 5*time.Millisecond
}

// schedLateness is the worst goroutine wait the scheduler sampled in [from, to].
func (o *oracle) schedLateness(from, to time.Duration) time.Duration {
	var worst time.Duration
	for _, l := range o.sched {
		if l.From < to && l.To > from {
			worst = max(worst, time.Duration(l.Target)*time.Microsecond)
		}
	}
	return worst
}

// schedSlack is slack for a check whose premise is that the watchdog's goroutine ran on time
// (a renewal sent when due, a limit kept): the probe's lateness or the scheduler's sampled goroutine
// waits, whichever is worse.
func (o *oracle) schedSlack(from, to time.Duration) time.Duration {
	return 2*max(o.lateness(from, to), o.schedLateness(from, to)) + 5*time.Millisecond
}

// doLost: Do returned ErrLost for work that ended with the lock's context live, the lock was
// never reported lost, and Do returned (so its release was answered, by a run of the script that
// came before the answer) well before the lock could expire: TTL after the send of its last
// acquisition or renewal. Redis ran that release while the lock was still ours: it was not lost.
func (o *oracle) doLost(h *hold) {
	if h.Kind != "do" || h.DoErr != "lost" || h.LostAt != 0 || !h.DoLive || h.DoRet == 0 {
		return
	}
	if _, ok := o.lossBefore(h.Name, family(h), h.Sent, h.DoRet); ok {
		return // ForceRelease (or a DEL) took it: its release says so
	}
	last := max(h.Sent, h.Renewed)
	expiry := last + h.TTL - h.TTL/10
	if h.DoRet+o.slack(last, h.DoRet) >= expiry {
		return
	}
	o.flag("do-lost", h.DoRet, []int{h.ID}, "%s: Do (hold %d) returned ErrLost for work that completed; its release was answered %v after the last renewal was sent (TTL %v), before the lock could expire",
		h.Name, h.ID, ms(h.DoRet-last), h.TTL)
}

// orphans: an acquisition that failed (its reply was late, so its caller gave up) left its token
// owning the lock although its path only delayed replies: a best-effort release after the failure
// would have reached Redis within the delay, unless that release itself failed (a give-back over
// Redlock waits only the node timeout; on a starved process it times out). Over Redlock only an orphan on a quorum of nodes is a
// violation; one on a minority (a node that answered after the node timeout) is inconclusive.
func (o *oracle) orphans() {
	for _, f := range o.fails {
		if f.Seen == 0 || f.Checked-f.Ret < orphanAge || o.lateness(f.Call, f.Checked) > 100*time.Millisecond {
			continue
		}
		if o.releaseErr[f.Tok] {
			continue // its give-back itself failed (a node timeout on a starved process): best effort, as documented
		}
		clean := true
		for _, x := range o.faults {
			if onPath(x, f.Client) && x.From < f.Checked && x.To > f.Call && x.Kind != "latency" && (x.Name == "" || x.Name == f.Name) {
				clean = false
			}
		}
		if !clean {
			continue
		}
		v := verdict{Prop: "orphan", At: f.Ret, Msg: fmt.Sprintf("%s: an acquisition by client %d (TTL %v) failed (%s), yet its token still owned the lock on %d node(s) %v later (faults on its path only delayed replies)",
			f.Name, f.Client, f.TTL, f.Err, f.Seen, ms(f.Checked-f.Ret))}
		if o.redlock && f.Seen < 2 {
			o.soft = append(o.soft, v)
			continue
		}
		o.bad = append(o.bad, v)
	}
}

func ms(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// excerpt renders a verdict with the holds it involves and the faults on their clients' paths
// around it.
func (o *oracle) excerpt(v verdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "VIOLATION %s at %v: %s\n", v.Prop, ms(v.At), v.Msg)
	from, to := v.At-2*time.Second, v.At+time.Second
	clients := map[int]bool{}
	for _, id := range v.Holds {
		if h := o.byID[id]; h != nil {
			b.WriteString("  " + describe(h) + "\n")
			clients[h.Client] = true
			from, to = min(from, h.Call), max(to, h.End)
		}
	}
	// The other holds of the same tokens (co-owners, re-entries) around it.
	for _, x := range o.holds {
		if slices.Contains(v.Holds, x.ID) || x.Ret > to || x.End < from && x.End > 0 {
			continue
		}
		for _, id := range v.Holds {
			if h := o.byID[id]; h != nil && h.Tok == x.Tok && h.Name == x.Name {
				b.WriteString("    same token: " + describe(&x) + "\n")
				break
			}
		}
	}
	for _, f := range o.faults {
		if f.From < to && f.To > from && (f.Target < 0 || clients[f.Target] || len(clients) == 0) {
			if f.Name != "" && !slices.ContainsFunc(v.Holds, func(id int) bool { h := o.byID[id]; return h != nil && h.Name == f.Name }) {
				continue // a key loss of another name
			}
			what := f.Detail
			if f.Name != "" {
				what = strings.TrimSpace(fmt.Sprintf("of %s %s %s", f.Name, f.Keys, what))
			}
			fmt.Fprintf(&b, "  fault %-9s on %s %v..%v %s\n", f.Kind, target(f.Target), ms(f.From), ms(f.To), what)
		}
	}
	return b.String()
}

func describe(h *hold) string {
	s := fmt.Sprintf("hold %d: %s client %d.%d %s tok %.6s fence %d holds %d TTL %v call %v sent %v ret %v live %v end %v (%s)",
		h.ID, h.Name, h.Client, h.Gen, h.Kind, h.Tok, h.Fence, h.Holds, h.TTL, ms(h.Call), ms(h.Sent), ms(h.Ret), ms(h.Live), ms(h.End), h.Cause)
	if h.Limit > 0 {
		s += fmt.Sprintf(" limit %d", h.Limit)
	}
	if h.Mode != "" {
		s += " mode " + h.Mode
	}
	if h.LostAt > 0 {
		s += fmt.Sprintf(" lost(%s) at %v", h.Why, ms(h.LostAt))
	}
	if h.Renewed > 0 {
		s += fmt.Sprintf(" last renewal sent %v", ms(h.Renewed))
	}
	if h.Tried > h.Renewed {
		s += fmt.Sprintf(" (then one sent %v: %s)", ms(h.Tried), h.TryErr)
	}
	for _, e := range h.Extends {
		s += fmt.Sprintf(" extend(%v)@%v ok=%v", e.TTL, ms(e.At), e.OK)
	}
	if h.Outer > 0 {
		s += fmt.Sprintf(" re-entered hold %d", h.Outer)
	}
	if h.MaxHold > 0 {
		s += fmt.Sprintf(" max hold %v", h.MaxHold)
	}
	if h.HeldSeen > 0 || h.Freed > 0 {
		s += fmt.Sprintf(" (Redis: held at %v, freed at %v)", ms(h.HeldSeen), ms(h.Freed))
	}
	if h.Queue > 0 {
		s += fmt.Sprintf(" queue timeout %v", h.Queue)
	}
	return s
}

func target(t int) string {
	if t < 0 {
		return fmt.Sprintf("node %d", -1-t)
	}
	return fmt.Sprintf("client %d", t)
}
