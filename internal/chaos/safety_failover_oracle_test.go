package chaos_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The failover variant's oracle: the lock and permit oracles, with exactly the room the docs give
// a failover (docs/guarantees.md, "Failover", and core.WithReplicaAck):
//
//   - A hold its client took WITHOUT WithReplicaAck may be lost by a promotion (replication is
//     asynchronous), and another owner may then take the name while it still believes it holds
//     it: its watchdog learns of the loss at its next renewal on the new master. So such a hold may
//     stay live after the promotion until one renewal interval (a third of the longest TTL its
//     token asked for on that client) plus failoverRTT (the renewal's round trips: a reconnection,
//     NOSCRIPT on a master that has no scripts yet, go-redis's retries) after its client reached the
//     new master, and this process's timer lateness. Within that bound the oracle counts its life
//     only up to the promotion (nobody could take the name from the new master before); beyond it,
//     the full life, so an owner that took the name meanwhile is an overlap (or over-limit).
//   - A hold its client took WITH WithReplicaAck has no such room: the acquisition counted only
//     once the replica had it, so the promoted replica has it, for as long as its holder may count
//     on it. Any overlap is a violation, also when the replica stalled after acknowledging it.
//   - Fences strictly increase across failovers (a fence is never below the server's clock, so a
//     promoted replica with older data still gives larger ones): the fence checks are unchanged.
//   - Do's ErrLost for completed work (do-lost) assumes that a release answered before the
//     lock's expiry found it; a failover in between may have lost it (or its renewals), so there
//     it is inconclusive.
//   - A permit lease nobody holds (orphan) must be gone a TTL after its holder let it go, if the
//     release or give-up reached Redis. A promotion can lose it, and revive a waiter's place in
//     the queue the waiter had left: a release then grants the dead waiter a lease (which expires
//     with its TTL, as any grant to a dead waiter does). So an orphan within orphanAfterFailover of
//     a failover is inconclusive.

// failoverRTT bounds the round trips of the first renewal after a client reached a new master
// (the reconnection, a NOSCRIPT and the script's load, the renewal again, go-redis's retries).
const failoverRTT = 150 * time.Millisecond

// orphanAfterFailover is how long after a failover a lease nobody holds may still appear: a revived
// place in a fair queue lives up to the waiter timeout (core's default, 5 s) and its grant a TTL
// (at most 2 s here), plus a second.
const orphanAfterFailover = 8 * time.Second

// failoverStats counts what the oracle made of the holds that lived across a promotion.
type failoverStats struct {
	across  int           // holds taken from an earlier master and live after the promotion
	acked   int           // of which taken with WithReplicaAck (no room)
	excused int           // of which live after the promotion within the bound
	beyond  int           // of which live beyond the bound (a violation if anyone took the name meanwhile)
	window  time.Duration // the longest life after a promotion that was excused
}

func (s failoverStats) String() string {
	return fmt.Sprintf("held across a promotion %d (with WithReplicaAck %d; without: %d within one renewal interval of the switch, longest %v after the promotion, %d beyond)",
		s.across, s.acked, s.excused, ms(s.window), s.beyond)
}

// checkFailover checks a failover run. acked tells which client slots use WithReplicaAck.
func checkFailover(r run, fos []failover, acked []bool) (violations, inconclusive []verdict, st failoverStats) {
	x := r
	x.holds = slices.Clone(r.holds)
	st = excuseFailovers(&x, fos, acked)
	locks, permits := splitRun(x)
	bad, soft := check(locks)
	pbad, psoft := checkPermits(permits)
	soft = append(soft, psoft...)
	o := newOracle(r)
	for _, v := range append(bad, pbad...) {
		if v.Prop == "orphan" {
			if f := failoverBefore(fos, v.At, orphanAfterFailover); f != nil {
				v.Msg += fmt.Sprintf(" — %v after a %s failover (master down at %v)", ms(v.At-f.Down), f.Kind, ms(f.Down))
				soft = append(soft, v)
				continue
			}
		}
		if v.Prop == "do-lost" && len(v.Holds) == 1 {
			if f := failoverDuring(fos, o.byID[v.Holds[0]]); f != nil {
				v.Msg += fmt.Sprintf(" — across a %s failover (promoted at %v)", f.Kind, ms(f.Promote))
				soft = append(soft, v)
				continue
			}
		}
		violations = append(violations, v)
	}
	byAt := func(a, b verdict) int { return cmp.Compare(a.At, b.At) }
	slices.SortStableFunc(violations, byAt)
	slices.SortStableFunc(soft, byAt)
	return violations, soft, st
}

// excuseFailovers cuts back the life of each hold that lived across a promotion within the room
// the docs give it (see the top of this file), and counts.
func excuseFailovers(r *run, fos []failover, acked []bool) (st failoverStats) {
	type owner struct {
		client    int
		name, tok string
	}
	longest := map[owner]time.Duration{}
	for _, h := range r.holds {
		k := owner{h.Client, h.Name, h.Tok}
		longest[k] = max(longest[k], h.TTL)
		for _, e := range h.Extends {
			longest[k] = max(longest[k], e.TTL)
		}
	}
	o := newOracle(*r)
	for i := range r.holds {
		h := &r.holds[i]
		if h.End > 0 && h.Live > h.End {
			// The Lost hook counts a hold live until its loss, but a context its caller's context
			// had cancelled before (documented: the lock's context derives from it) was not live:
			// its lock went on being renewed for nobody. Its life ends where it was seen to end.
			h.Live = h.End
		}
		var f *failover // the last promotion it lived across, taken from an earlier master
		for j := range fos {
			if x := &fos[j]; h.Client < len(x.Switch) && h.Ret < x.Switch[h.Client] && x.Promote < h.Live {
				f = x
			}
		}
		if f == nil {
			continue
		}
		st.across++
		if h.Client < len(acked) && acked[h.Client] {
			st.acked++
			continue
		}
		ts := f.Switch[h.Client]
		if bound := ts + longest[owner{h.Client, h.Name, h.Tok}]/3 + failoverRTT; h.Live > bound+o.slack(ts, h.Live) {
			st.beyond++
			continue
		}
		st.excused++
		st.window = max(st.window, h.Live-f.Promote)
		h.Live = f.Promote
	}
	return st
}

// failoverDuring returns the last failover whose master went down while h was held (from its call
// to Do's return), or nil.
func failoverDuring(fos []failover, h *hold) *failover {
	if h == nil {
		return nil
	}
	var f *failover
	for j := range fos {
		if x := &fos[j]; x.Down > h.Call && x.Down < h.DoRet {
			f = x
		}
	}
	return f
}

// failoverBefore returns the last failover whose master went down within d before at, or nil.
func failoverBefore(fos []failover, at, d time.Duration) *failover {
	var f *failover
	for j := range fos {
		if x := &fos[j]; x.Down <= at && x.Down >= at-d {
			f = x
		}
	}
	return f
}

// splitRun splits a run into its locks and its permits (with the reads of the permits, and the
// key and panic findings counted once, with the locks). Faults, slow commands and timer
// lateness belong to both.
func splitRun(r run) (locks, permits run) {
	locks, permits = r, r
	locks.holds, permits.holds, locks.fails, permits.fails = nil, nil, nil, nil
	for _, h := range r.holds {
		if h.Limit > 0 {
			permits.holds = append(permits.holds, h)
		} else {
			locks.holds = append(locks.holds, h)
		}
	}
	for _, f := range r.fails {
		if f.Limit > 0 {
			permits.fails = append(permits.fails, f)
		} else {
			locks.fails = append(locks.fails, f)
		}
	}
	locks.permits, permits.noTTL, permits.panics = nil, nil, nil
	return locks, permits
}

// describeFailovers renders the failovers for the log.
func describeFailovers(fos []failover) string {
	var b strings.Builder
	for _, f := range fos {
		fmt.Fprintf(&b, "  %s: from %v, down %v, promoted %v, switched", f.Kind, ms(f.From), ms(f.Down), ms(f.Promote))
		for _, s := range f.Switch {
			fmt.Fprintf(&b, " %v", ms(s-f.Promote))
		}
		fmt.Fprintf(&b, " after, in sync %v\n", ms(f.Synced))
	}
	return b.String()
}
