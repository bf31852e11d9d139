package core

import (
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
	max   time.Duration // the decaying maximum, halved every lateHalfLife
	at    time.Time     // when max was last decayed
	guard atomic.Int64  // 2 × max, as a time.Duration: read without w.mu by acquisitions (outlived)
}

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
	l.guard.Store(int64(2 * l.max))
}

// ahead returns how early the watchdog does what it keeps: the guard.
func (l *lateness) ahead() time.Duration { return time.Duration(l.guard.Load()) }

// seed records an acquisition's round trip, took, as the timer's lateness while the watchdog keeps
// nothing (so its timer has not run lately): else the first hold of a starved process would have
// no guard. Acquisitions call it (Client.outlived) before they check their validity.
func (w *watchdog) seed(now time.Time, took time.Duration) {
	if 2*took <= w.late.ahead() {
		return // (it would change nothing: no lock taken)
	}
	w.mu.Lock()
	if w.h.Len() == 0 {
		w.late.observe(now, took)
	}
	w.mu.Unlock()
}
