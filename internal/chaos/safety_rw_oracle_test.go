package chaos_test

import (
	"fmt"
	"strings"
	"time"
)

// The read-write variant's oracle (checkRW). A read-write lock is a semaphore whose writers pass
// the limit 1 and readers core.MaxPermits, so the semaphore oracle's checks are the read-write
// promises: over-limit (a writer granted while an earlier hold stayed live, or a reader while a
// writer did), fence (acquisition order), lease-count, lease-gone and orphan over the reads of
// Redis. Added here: nested holds (reentry-fence, nested-outlived), upgrades that were not refused
// (upgrade), and starved writers (starved).

// Bounds of the starvation check.
const (
	// starveAfter: a write that waited less is not starved, whoever went first.
	starveAfter = 250 * time.Millisecond
	// queueMargin: a read whose call began this long after a write's is certainly behind it in
	// Redis's queue when the write's path was healthy (its first attempt, which queues it, is sent
	// at once and answered within slowCmd).
	queueMargin = 50 * time.Millisecond
	// giveUpMargin: a write that gave up left the queue (dequeue) at most this long before its call
	// returned, when its path was healthy.
	giveUpMargin = 100 * time.Millisecond
)

// checkRW is the oracle of the read-write variant.
func checkRW(r run, writes []writeCall, upgrades []verdict) (violations, inconclusive []verdict) {
	o := newOracle(r)
	names, byName := o.byName()
	for _, n := range names {
		var fresh, nested []*hold
		for _, h := range byName[n] {
			if h.Kind == "ctx" {
				nested = append(nested, h)
			} else {
				fresh = append(fresh, h)
			}
		}
		o.overLimit(fresh)
		o.crossKind(fresh)
		o.permitFences(fresh)
		o.nestedRW(nested)
	}
	// The reads of Redis against the fresh holds only: a nested hold has its outer hold's token,
	// and the lease is the outer hold's (a nested hold that ended is no orphan while its outer
	// hold holds); a nested hold live without a lease is nested-outlived or the outer's lease-gone.
	fr := r
	fr.holds = nil
	for _, h := range r.holds {
		if h.Kind != "ctx" && (h.Mode == "" || h.Mode == "read" || h.Mode == "write") { // (watchRW reads the :rw leases)
			fr.holds = append(fr.holds, h)
		}
	}
	lo := newOracle(fr)
	_, freshByName := lo.byName()
	lo.leases(freshByName)
	o.bad, o.soft = append(o.bad, lo.bad...), append(o.soft, lo.soft...)
	o.starved(writes, byName)
	o.bad = append(o.bad, upgrades...)
	return o.finish()
}

// nestedRW: a hold nested in another (through its context) shares its acquisition, so it has its
// outer hold's token and fence (reentry-fence), and it ends no later than the outer hold: seen
// live after the outer hold's context was seen cancelled by the hold's end is a violation
// (nested-outlived).
func (o *oracle) nestedRW(hs []*hold) {
	for _, b := range hs {
		outer := o.byID[b.Outer]
		if outer == nil {
			continue
		}
		if b.Tok != outer.Tok || b.Fence != outer.Fence {
			o.flag("reentry-fence", b.Ret, []int{outer.ID, b.ID}, "%s: nested hold %d has token %.6s fence %d, its outer hold %d token %.6s fence %d",
				b.Name, b.ID, b.Tok, b.Fence, outer.ID, outer.Tok, outer.Fence)
		}
		// (An outer context that ended with its caller's context, cause "other:...", says nothing
		// of the hold's end: the nested context, derived from it, ended with it, and the Lost hook
		// records both holds live until their loss.)
		if outer.End > 0 && b.Live > outer.End && !strings.HasPrefix(outer.Cause, "other:") {
			o.flag("nested-outlived", b.Live, []int{outer.ID, b.ID}, "%s: nested hold %d was live %v after its outer hold %d's context was seen cancelled (%s)",
				b.Name, b.ID, ms(b.Live-outer.End), outer.ID, outer.Cause)
		}
	}
}

// starved: a waiting write that waited more than starveAfter, during which reads whose calls began
// after it was queued (queueMargin) were granted before it was (or before it gave up): readers
// that came after a waiting writer went ahead of it. With a fault, a slow command or a late timer
// on the writer's path during its wait, its place in the queue may have lapsed or its grant gone
// unclaimed: inconclusive.
func (o *oracle) starved(writes []writeCall, byName map[string][]*hold) {
	for _, w := range writes {
		if w.ret-w.call <= starveAfter || strings.Contains(w.err, "closed") {
			continue
		}
		cut := w.ret
		if !w.granted {
			cut -= giveUpMargin
		}
		var ahead []int
		for _, r := range byName[w.name] {
			if r.Kind != "ctx" && r.Limit > 1 && r.Call > w.call+queueMargin && r.Ret < cut {
				ahead = append(ahead, r.ID)
			}
		}
		if len(ahead) == 0 {
			continue
		}
		outcome := "was granted"
		if !w.granted {
			outcome = "gave up (" + w.err + ")"
		}
		v := verdict{Prop: "starved", At: w.ret, Holds: ahead, Msg: fmt.Sprintf(
			"%s: a write by client %d waited %v (from %v) and %s, while %d reads that asked after it were granted first (holds %v)",
			w.name, w.client, ms(w.ret-w.call), ms(w.call), outcome, len(ahead), ahead)}
		if !o.healthy(w.client, w.call, w.ret, slowCmd) {
			v.Msg += " — its path was not healthy meanwhile"
			o.soft = append(o.soft, v)
			continue
		}
		o.bad = append(o.bad, v)
	}
}

// crossKind (the mixed variant): a read and a permit of one name exclude each other, so read B
// (or permit B) granted while a permit (or read) A, granted before B's call began, stayed live
// after B returned is a violation; within this process's timer lateness it is inconclusive. (A
// lock or a write beside anything is over-limit: their limit is 1.)
func (o *oracle) crossKind(hs []*hold) {
	for _, b := range hs {
		if b.Mode != "read" && b.Mode != "permit" {
			continue
		}
		for _, a := range hs {
			if a.Mode == "" || a.Mode == b.Mode || (a.Mode != "read" && a.Mode != "permit") ||
				a.Tok == b.Tok || a.Ret >= b.Call || a.Live <= b.Ret {
				continue
			}
			if _, excused := o.lossExcuses(a, b.Ret); excused {
				continue
			}
			margin := a.Live - b.Ret
			v := verdict{Prop: "cross-kind", At: b.Ret, Holds: []int{a.ID, b.ID}, Msg: fmt.Sprintf(
				"%s: %s %d (fence %d) was granted while %s %d (fence %d), granted before it was asked for, stayed live %v after it returned",
				b.Name, b.Mode, b.ID, b.Fence, a.Mode, a.ID, a.Fence, ms(margin))}
			if slack := o.slack(b.Ret-time.Second, a.Live); margin <= slack {
				v.Msg += fmt.Sprintf(" — within this process's timer lateness (%v)", ms(slack))
				o.soft = append(o.soft, v)
			} else {
				o.bad = append(o.bad, v)
			}
			break
		}
	}
}
