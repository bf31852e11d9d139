package election

import "time"

// lockState is what one read of the leadership lock found.
type lockState struct {
	fence  int64         // the lock's fence: its holder's, or the last holder's while free; 0: no key
	held   bool          // a token holds the lock
	leader Leader        // the proclaimed leader; zero when the holder has not proclaimed, or none holds
	pttl   time.Duration // the key's remaining TTL
}

// order decides what an observer reports, so that leaders are reported in fence order and a
// vacancy only after the term reported before it ended. Announcements and reads reach the observer
// on two connections: a read can see a term whose announcement is still on its way, and an
// announcement can arrive after a read that was sent before it was published. So a read is
// settled only once every announcement published before it has arrived (or the subscription
// failed meanwhile), and its report is then judged against what was reported since it was sent.
// Not safe for concurrent use.
type order struct {
	top    int64 // the highest fence reported; never lowered, a vacancy does not reset it
	vacant bool  // the last report was a vacancy
	any    bool  // something has been reported
}

// announced reports whether to report announcement l: a leader above every one reported.
func (o *order) announced(l Leader) bool {
	if l.Fence <= o.top {
		return false
	}
	o.top, o.vacant, o.any = l.Fence, false, true
	return true
}

// caughtUp reports whether read s can be settled at once: it shows no term above the highest
// reported, so no announcement it depends on can still be on its way; or it shows no leader
// while the last report was a vacancy, so it reports nothing whatever arrives (an idle election
// costs no PING).
func (o *order) caughtUp(s lockState) bool {
	return s.fence != 0 && s.fence <= o.top || s.leader.Fence == 0 && o.any && o.vacant
}

// settle returns what read s reports (ok false: nothing), once every announcement published
// before it has been handled; top is o.top when the read was sent.
func (o *order) settle(s lockState, top int64) (l Leader, ok bool) {
	if s.leader.Fence != 0 {
		// Its announcement was published before the read: if it has not arrived, it was lost.
		if !o.announced(s.leader) {
			return Leader{}, false
		}
		return s.leader, true
	}
	if o.any && o.vacant {
		return Leader{}, false
	}
	var ended bool // the term reported last had ended by the read
	switch {
	case s.fence == 0: // no key: no lock, so no term, unless one was announced since the read was sent
		ended = o.top == top
	case s.held: // taken, not yet proclaimed: the terms below it ended; its own is not reported yet
		ended = o.top < s.fence
	default: // free: the terms up to its fence ended
		ended = o.top <= s.fence
	}
	if !ended {
		return Leader{}, false
	}
	o.vacant, o.any = true, true
	return Leader{}, true
}
