package chaos_test

import (
	"fmt"
	"slices"
	"time"
)

// The safety oracle's checks of key losses and of WithMaxHold (issue #27), with the same
// reasoning by bounds as the rest of the oracle (safety_oracle_test.go).
//
// Key losses (ForceRelease, DEL, FLUSHALL, a restart without persistence): docs/guarantees.md lets
// a holder whose acquisition was deleted work on until its next renewal shows the loss, while
// somebody else already holds the lock. So a hold whose acquisition was certainly in effect when
// a loss of its name began must have its context cancelled by lossBound; an overlap, a permit over
// the limit or a missing lease is excused only while the earlier holder stays within that bound.
// Fences still increase across a loss (a loss that drops the fence counter less than 2 ms after
// an acquisition is outside the documented clock condition and excuses a fence that did not).

// defaultRenewRatio is core's WithRenewRatio default: the watchdog renews a lock a third of its TTL
// after the send of its last successful acquisition or renewal.
const defaultRenewRatio = 1.0 / 3

// losses returns the key losses that may have deleted an acquisition of name in family fam (see
// family), in time order. In the mixed variant a loss of the name's lock key, which holds the
// marks of its permits and read-write holds, counts for every family.
func (o *oracle) losses(name, fam string) []span {
	var out []span
	for _, f := range o.faults {
		if !lossKinds[f.Kind] || f.Name != "" && f.Name != name {
			continue
		}
		switch f.Keys {
		case "":
		case "lock":
			if fam != "lock" && !o.mixed {
				continue
			}
		case "permits", "rw":
			if fam != f.Keys {
				continue
			}
		default: // "fence": the name's lock key alone, the permits' mark (their holds are lost with it)
			if fam != "permits" {
				continue
			}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b span) int { return int(a.From - b.From) })
	return out
}

// family is the keys whose loss deletes hold h's acquisition: "lock" for a lock (its name's lock
// key), "permits" for a permit (the semaphore's leases), "rw" for a read or a write of the mixed
// variant (the leases under :rw; the read-write variant, which deletes no key, records its holds
// as permits).
func family(h *hold) string {
	switch {
	case h.Mode == "read" || h.Mode == "write":
		return "rw"
	case h.Mode == "permit" || h.Mode == "" && h.Limit > 0:
		return "permits"
	}
	return "lock"
}

// fenceLosses returns the losses that may have dropped name's fence counter: the lock's key keeps
// a lock's fences (ForceRelease keeps it), the :fence counter a semaphore's; in the mixed variant
// the lock key keeps the one sequence of every kind.
func (o *oracle) fenceLosses(name, fam string) []span {
	var out []span
	for _, f := range o.faults {
		if !lossKinds[f.Kind] || f.Kind == "force" || f.Name != "" && f.Name != name {
			continue
		}
		if f.Keys == "" || f.Keys == "lock" && (fam == "lock" || o.mixed) || fam == "permits" && f.Keys == "fence" {
			out = append(out, f)
		}
	}
	return out
}

// fenceReset reports whether a loss of name's fence counter came less than 2 ms after a's
// acquisition and before b's returned: then b's fence, taken from the clock floor, may be as low
// as a's (the documented clock condition wants the loss at least a millisecond after the last
// acquisition).
func (o *oracle) fenceReset(a, b *hold) bool {
	for _, f := range o.fenceLosses(a.Name, family(a)) {
		if f.To > a.Sent && f.From < a.Ret+2*time.Millisecond && f.From < b.Ret {
			return true
		}
	}
	return false
}

// lossBound is the latest moment hold h may still be live after the loss l of its acquisition:
// its next renewal is sent at most a renewal interval (the renewal ratio × the longest TTL its
// token's holds on its client asked for, Extend included) after the loss and answers within the
// longest command its client's path saw (twice: a renewal in flight at the loss may have delayed
// it). When that path had a fault, a failed command or a restart meanwhile, renewals may fail
// rather than answer: the validity deadline then ends the hold, at most the longest TTL after the
// loss. Both plus this process's timer lateness (slack).
func (o *oracle) lossBound(h *hold, l span) time.Duration {
	longest, _ := o.tokenTTLAt(h, l.To)
	interval := time.Duration(float64(longest) * defaultRenewRatio)
	from, to := l.From, l.To+interval+2*time.Second
	end := l.To + longest
	if o.pathClear(h.Client, from, to) {
		end = l.To + interval + 2*o.worstCmd(h.Client, from, to)
	}
	return end + o.schedSlack(l.From, end+time.Second)
}

// pathClear reports whether client's path had no fault (a key loss of a name is none: it leaves
// the path alone; a restart is one) and no failed command in [from, to].
func (o *oracle) pathClear(client int, from, to time.Duration) bool {
	for _, f := range o.faults {
		if onPath(f, client) && f.From < to && f.To > from && (!lossKinds[f.Kind] || f.Kind == "restart") {
			return false
		}
	}
	for _, s := range o.slow {
		if s.Target == client && s.Kind == "error" && s.From < to && s.To > from {
			return false
		}
	}
	return true
}

// worstCmd is the longest command client's path saw in [from, to], at least recordCmd (faster ones
// are not recorded).
func (o *oracle) worstCmd(client int, from, to time.Duration) time.Duration {
	worst := recordCmd
	for _, s := range o.slow {
		if s.Target == client && s.From < to && s.To > from {
			worst = max(worst, s.To-s.From)
		}
	}
	return worst
}

// lossExcuses returns a key loss that may have deleted a's acquisition (it may have come after a's
// attempt was sent) before another acquisition returned at before, with a still within its bound
// after it: that loss, not the lock, let the other in.
func (o *oracle) lossExcuses(a *hold, before time.Duration) (span, bool) {
	for _, l := range o.losses(a.Name, family(a)) {
		if l.To > a.Sent && l.From < before && a.Live <= o.lossBound(a, l) {
			return l, true
		}
	}
	return span{}, false
}

// lossLate: a hold whose acquisition was certainly in effect when a loss of its name began (it
// returned before, and was live after the loss ended) stayed live past lossBound: its renewals
// kept it although its acquisition was gone (they renewed another acquisition, or none).
func (o *oracle) lossLate(h *hold) {
	for _, l := range o.losses(h.Name, family(h)) {
		if l.Unsure || h.Ret >= l.From || h.Live <= l.To {
			continue
		}
		if bound := o.lossBound(h, l); h.Live > bound {
			longest, _ := o.tokenTTLAt(h, l.To)
			o.bad = append(o.bad, verdict{Prop: "loss-late", At: bound, Holds: []int{h.ID}, Fault: l.Kind, Msg: fmt.Sprintf(
				"%s: hold %d (%s, fence %d, TTL up to %v) was live %v after %s at %v..%v deleted its acquisition, %v past the bound (a renewal interval %v after it, then a round trip)",
				h.Name, h.ID, h.Kind, h.Fence, longest, ms(h.Live-l.To), lossName(l), ms(l.From), ms(l.To), ms(h.Live-bound),
				ms(time.Duration(float64(longest)*defaultRenewRatio)))})
			return
		}
	}
}

// lossBefore returns a loss of name's family fam that may have come after from and before to.
func (o *oracle) lossBefore(name, fam string, from, to time.Duration) (span, bool) {
	for _, l := range o.losses(name, fam) {
		if l.To > from && l.From < to {
			return l, true
		}
	}
	return span{}, false
}

func lossName(l span) string {
	switch l.Kind {
	case "force":
		return "ForceRelease"
	case "del":
		if l.Keys == "" {
			return "DEL (every key of the name)"
		}
		return "DEL (" + l.Keys + ")"
	case "flushall":
		return "FLUSHALL"
	case "restart":
		return "a restart without persistence"
	case "evict":
		return "an eviction (" + l.Keys + ")"
	}
	return l.Kind
}

// maxHolds checks the holds with a WithMaxHold limit (their own, or their Client's default):
//   - maxhold-late: the hold's context ended (End, an upper bound) later than the limit after it
//     was acquired (Ret, an upper bound of the acquisition), by more than this process's timer
//     lateness explains;
//   - maxhold-early: the context ended with cause ErrMaxHold before any limit in force (its own, or
//     the hold it re-entered through its context) could have passed;
//   - maxhold-not-released: after its end, Redis still had the hold's token as the owner (of the
//     lock, or of its permit) well after the end, while its client's path had been healthy since
//     the call began, and no co-owner on another client was still holding.
func (o *oracle) maxHolds(h *hold) {
	if h.MaxHold > 0 && h.End > 0 {
		deadline := h.Ret + h.MaxHold
		if late := h.End - deadline; late > o.schedSlack(deadline-time.Second, h.End)+maxHoldGrace {
			o.bad = append(o.bad, verdict{Prop: "maxhold-late", At: deadline, Holds: []int{h.ID}, Fault: "maxhold", Msg: fmt.Sprintf(
				"%s: hold %d (%s, WithMaxHold %v) ended %v after its limit passed (cause %s)", h.Name, h.ID, h.Kind, h.MaxHold, ms(late), h.Cause)})
		}
	}
	if h.Cause != "maxhold" {
		return
	}
	limit, by := time.Duration(-1), ""
	if h.MaxHold > 0 {
		limit, by = h.Call+h.MaxHold, "its own"
	}
	if outer := o.byID[h.Outer]; h.Kind == "ctx" && outer != nil && outer.MaxHold > 0 && (limit < 0 || outer.Call+outer.MaxHold < limit) {
		limit, by = outer.Call+outer.MaxHold, fmt.Sprintf("hold %d's", outer.ID)
	}
	switch {
	case limit < 0:
		o.flag("maxhold-early", h.End, []int{h.ID}, "%s: hold %d (%s) ended with cause ErrMaxHold, but neither it nor a hold it re-entered had a limit", h.Name, h.ID, h.Kind)
	case h.End < limit:
		o.flag("maxhold-early", h.End, []int{h.ID}, "%s: hold %d (%s) ended with cause ErrMaxHold %v before %s limit could pass", h.Name, h.ID, h.Kind, ms(limit-h.End), by)
	}
	// The path must have been healthy since the call began: an attempt that failed while it was
	// not (over Redlock each attempt has a hold of its own) may have left a grant that a delayed
	// request made after its give-back, which keeps the lock until its TTL (a documented limit of
	// the give-back).
	if h.HeldSeen-h.End <= releaseGrace+o.schedSlack(h.End, h.HeldSeen) || !o.healthy(h.Client, h.Call, h.HeldSeen, 100*time.Millisecond) {
		return
	}
	for i := range o.holds {
		if x := &o.holds[i]; x.Tok == h.Tok && x.Client != h.Client && (x.End == 0 || x.End > h.End) {
			return // a co-owner (WithOwner) on another client may still hold it
		}
	}
	o.bad = append(o.bad, verdict{Prop: "maxhold-not-released", At: h.HeldSeen, Holds: []int{h.ID}, Fault: "maxhold", Msg: fmt.Sprintf(
		"%s: hold %d (WithMaxHold %v, TTL %v) ended at %v, yet Redis still had its token as the owner %v later, while its client's path was healthy",
		h.Name, h.ID, h.MaxHold, h.TTL, ms(h.End), ms(h.HeldSeen-h.End))})
}

const (
	// maxHoldGrace covers what follows the watchdog's timer before End is recorded: the goroutine
	// that cancels the context, and the one context.AfterFunc starts to record it.
	maxHoldGrace = 25 * time.Millisecond
	// releaseGrace is how long the release of a hold WithMaxHold ended may take on a healthy path
	// before Redis must no longer have it.
	releaseGrace = 250 * time.Millisecond
)
