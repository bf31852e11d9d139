package core

import (
	"log/slog"
	"math"
	"sync/atomic"
	"time"
)

// lateness is how late the watchdog's timer fires in this process (starved of CPU: issue #44, 4–34
// ms late at a 300 ms TTL, whose drift is 5 ms), kept as a decaying maximum, and the guard: twice
// that, how early holds are renewed and ended, so that a timer as late as twice the lateness seen
// lately still ends a hold in time. (WithMaxHold limits are kept exactly: early buys no safety.)
type lateness struct {
	max time.Duration // the decaying maximum, halved every lateHalfLife
	at  time.Time     // when max was last decayed
	g   atomic.Int64  // the guard: 2 × max, as a time.Duration (read without w.mu)
	// warned is when warnLate last logged (only the watchdog's goroutine uses it).
	warned time.Time
}

// lateWarnEvery is how often, at most, a Client warns that its timers run too late for a TTL.
const lateWarnEvery = time.Minute

// lateHalfLife is how fast a lateness seen once is forgotten: a process late by d keeps a guard
// of d (covering that lateness once more) one half-life later.
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

// guard returns how early a hold of ttl is renewed and ended: the guard, capped at ttl/4.
func (l *lateness) guard(ttl time.Duration) time.Duration { return min(l.ahead(), ttl/4) }

// wakeFor returns when the timer is to fire for an entry due at: the guard early, not before now.
func (w *watchdog) wakeFor(at time.Time) time.Time {
	at = at.Add(-w.late.ahead())
	if now := time.Now(); at.Before(now) {
		return now
	}
	return at
}

// warnLate logs, at most once every lateWarnEvery, that the timers run later than the capped guard
// of a hold of ttl (0: none) covers. Only the watchdog's goroutine calls it.
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

// lead is how early e's renewal is sent: its guard, but at most a quarter of its interval (more,
// with collect's batching window, renewed at every wake a renewal that just landed).
func (w *watchdog) lead(e *entry) time.Duration {
	return min(w.late.guard(e.ttl), w.interval(e.ttl)/4)
}
