package core

import (
	"log/slog"
	"math"
	"sync/atomic"
	"time"
)

// lateness is how late the watchdog's timer fires in this process, and the guard it keeps for it.
//
// The watchdog ends a hold whose renewals did not succeed in time when its timer fires at the
// hold's validity deadline. In a process starved of CPU (a container at its quota, more runnable
// goroutines than GOMAXPROCS, a long garbage collection) that timer fires late, by an amount no
// margin fixed in advance can cover (issue #44: 4–34 ms late at a 300 ms TTL, whose drift is
// 5 ms). Each time it wakes, the watchdog knows when it asked to wake: it keeps a decaying maximum
// of the difference, and does everything it keeps (renewals, validity deadlines) guard = twice
// that maximum early. So a timer that fires as late as twice the lateness seen lately still ends
// the hold before its validity deadline; a process that runs on time keeps a guard of a few
// microseconds. (WithMaxHold limits are kept exactly: ending a hold early there buys no safety.)
type lateness struct {
	max time.Duration // the decaying maximum, halved every lateHalfLife
	at  time.Time     // when max was last decayed
	g   atomic.Int64  // the guard: 2 × max, as a time.Duration (read without w.mu)
	// warned is when warnLate last logged (only the watchdog's goroutine reads or writes it).
	warned time.Time
}

// lateWarnEvery is how often, at most, a Client warns that its timers run too late for a TTL.
const lateWarnEvery = time.Minute

// lateHalfLife is how fast a lateness seen once is forgotten: a process that was late by d keeps a
// guard of d (covering that lateness once more) one half-life later.
const lateHalfLife = 10 * time.Second

// observe records that the timer fired late by d at now; the caller holds w.mu.
func (l *lateness) observe(now time.Time, d time.Duration) {
	if el := now.Sub(l.at); el > 0 && l.max > 0 {
		l.max = time.Duration(float64(l.max) * math.Exp2(-float64(el)/float64(lateHalfLife)))
	}
	l.at = now
	l.max = max(l.max, d)
	l.g.Store(int64(2 * l.max))
}

// ahead returns the guard: how early the watchdog wakes for what it keeps.
func (l *lateness) ahead() time.Duration { return time.Duration(l.g.Load()) }

// guard returns how early a hold of ttl is renewed and ended: the guard, but at most ttl/4 (a
// guard beyond that would end every such hold as it is taken; docs/guarantees.md says from which
// TTL on the guard covers the lateness).
func (l *lateness) guard(ttl time.Duration) time.Duration { return min(l.ahead(), ttl/4) }

// wake returns when the watchdog must see e: its validity deadline that entry's guard early, its
// renewal lead early (watchdog.lead), or its WithMaxHold limit.
func (l *lateness) wake(e *entry, lead time.Duration) time.Time {
	at := e.valid.Add(-l.guard(e.ttl))
	if n := e.next.Add(-lead); !e.inflight && n.Before(at) {
		at = n
	}
	if !e.maxAt.IsZero() && e.maxAt.Before(at) {
		at = e.maxAt
	}
	return at
}

// wakeFor returns when the scheduler's timer is to fire for an entry due at (entry.due): its guard
// early, but not before now (a timer cannot fire in the past: its lateness counts from now).
func (w *watchdog) wakeFor(at time.Time) time.Time {
	at = at.Add(-w.late.ahead())
	if now := time.Now(); at.Before(now) {
		return now
	}
	return at
}

// warnLate logs, at most once every lateWarnEvery, that this process's timers run later than a
// hold of ttl can cover (the guard it needs is more than TTL/4, the cap): such a hold may outlive
// its lock in Redis. Zero ttl: nothing to say. Only the watchdog's goroutine calls it.
func (w *watchdog) warnLate(ttl time.Duration) {
	now := time.Now()
	if ttl == 0 || now.Sub(w.late.warned) < lateWarnEvery {
		return
	}
	w.late.warned = now
	late := (w.late.ahead() / 2).Round(time.Millisecond)
	w.c.log(slog.LevelWarn, "this process's timers run too late for a lock's TTL: a hold may outlive its lock",
		slog.Duration("timer_lateness", late), slog.Duration("ttl", ttl), slog.Duration("min_ttl", 8*late),
		slog.String("fix", "use a TTL of at least min_ttl, or give the process more CPU; see docs/guarantees.md#choosing-a-ttl"))
}

// lead is how early e's renewal is sent for the timer's lateness: its guard, but at most a quarter
// of its renewal interval. (Renewals need no more: a renewal sent late still has two thirds of the
// TTL to land before the validity deadline. With the full guard, up to TTL/4, plus collect's
// batching window, a renewal that just landed was due again at once: every wake renewed it.)
func (w *watchdog) lead(e *entry) time.Duration {
	return min(w.late.guard(e.ttl), w.interval(e.ttl)/4)
}
