package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// drift is the safety margin kept before a lock's expiry: TTL × the drift factor (0.01 by default,
// as Redlock prescribes) + 2ms.
func (o *options) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*o.driftFactor) + 2*time.Millisecond
}

// watchdog is the one renewal scheduler of a Client: a heap of held locks ordered by their next
// deadline, served by one goroutine that sends due renewals in pipelined batches.
type watchdog struct {
	c *Client
	// lost ends the holds of an entry given up (Client.lost), endHolds those whose WithMaxHold
	// limit passed (Client.endHolds): the watchdog says what ends, the Client ends it.
	lost, endHolds func(lostSet)
	mu             sync.Mutex
	held           map[string]*entry // by lock key
	h              entryHeap
	base           time.Time   // the heap's due times count from it (monotonic)
	t              *time.Timer // the scheduler's timer, reset under mu (nil until the first lock)
	stop           chan struct{}
	done           chan struct{}
	batches        sync.WaitGroup
	// pipelines and scripts count renewal round trips and the scripts they carried.
	pipelines, scripts atomic.Int64
	started            bool
	stopped            bool
	wakeAt             time.Time // when the scheduler's timer fires next
	rounds             sync.Pool // of *round: a renewal round's buffers (watchdog_round.go)
}

func newWatchdog(c *Client) *watchdog {
	return &watchdog{c: c, lost: c.lost, endHolds: c.endHolds, held: make(map[string]*entry), stop: make(chan struct{}),
		done: make(chan struct{}), base: time.Now()}
}

func (w *watchdog) interval(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl) * w.c.opt.renewRatio)
}

// holding reports whether this client already holds key for token (a new hold of it re-enters it).
func (w *watchdog) holding(key string, token any) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.held[key]
	return e != nil && !e.gone && e.tok == token && len(e.locks) > 0
}

// add registers a freshly acquired Lock, sent being when its acquire request was sent; held is what
// the hook was told the acquisition adds to the locks the Client holds (HoldInfo.Held).
func (w *watchdog) add(l *Lock, sent time.Time, held int) bool {
	if l.nested() {
		return w.nest(l) // renewed with the hold it is nested in (rwlock.go)
	}
	var stale lostSet
	defer func() { w.lost(stale) }() // (after w.mu is unlocked)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}
	e := w.held[l.k.Main]
	if e != nil && !e.gone && e.tok == l.tok && l.holds == 1 && e.k.Fence != l.k.Fence {
		// A fresh acquisition under the token (WithToken) while this Client held an earlier one:
		// that one is gone (expired, or force-released), and its holds are lost.
		stale, e = w.lose(e, "not_owner", nil), nil
	}
	if e == nil || e.tok != l.tok || e.gone {
		e = &l.own
		*e = entry{k: &l.k, tok: l.tok, idx: -1}
		e.locks = e.one[:0]
		w.held[l.k.Main] = e
	}
	fresh := len(e.locks) == 0
	e.counted += held
	e.locks = append(e.locks, l)
	l.e = e
	e.setMaxAt()
	if l.ttl > e.ttl {
		e.ttl = l.ttl
	}
	// The script left the lock with at least l.ttl to live (a re-entry never shortens it), or a
	// fair grant's shorter first lease (see claim).
	lease := l.firstLease()
	if v := sent.Add(lease - w.c.opt.drift(lease)); v.After(e.valid) {
		e.valid = v
	}
	// A re-entry never postpones the entry's renewal: its own TTL may be far shorter than the
	// validity the entry must keep up.
	if next := sent.Add(w.interval(min(e.ttl, lease))); fresh || next.Before(e.next) {
		e.next = next
	}
	w.schedule(e)
	if !w.started {
		w.started = true
		w.wakeAt = e.due()
		w.t = time.NewTimer(time.Until(w.wakeAt))
		go w.run()
	}
	return true
}

// schedule (re)places e in the heap; the caller holds w.mu. The scheduler is woken only when e is
// due before its timer fires: a timer that fires early finds nothing to do and sleeps again.
func (w *watchdog) schedule(e *entry) {
	w.fix(e)
	w.arm(e.due())
}

// arm makes the scheduler wake no later than at; the caller holds w.mu. Resetting the timer here,
// rather than waking the scheduler to do it, keeps lock and unlock free of goroutine switches: a
// timer that is already due earlier is left alone.
func (w *watchdog) arm(at time.Time) {
	if w.t != nil && at.Before(w.wakeAt) {
		w.wakeAt = at
		w.t.Reset(time.Until(at))
	}
}

// unschedule removes e; the caller holds w.mu.
func (w *watchdog) unschedule(e *entry) {
	e.gone = true
	if e.idx >= 0 {
		w.h.remove(e.idx)
	}
	if w.held[e.k.Main] == e {
		delete(w.held, e.k.Main)
	}
}

// detach removes l from its entry and stops renewing when no local holder is left (l's end event
// then carries the entry's Held count and Last).
func (w *watchdog) detach(l *Lock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := l.e
	if e == nil {
		return
	}
	for i, x := range e.locks {
		if x == l {
			e.locks = append(e.locks[:i], e.locks[i+1:]...)
			break
		}
	}
	if len(e.locks) == 0 && !e.gone {
		w.unschedule(e)
		w.ends(e, l)
	} else if !e.gone && !e.maxAt.IsZero() {
		e.setMaxAt()
		if e.idx >= 0 {
			w.fix(e)
		}
	}
}

// ends marks l's end event as the one that ends e, the Client's hold of the lock: it carries the
// Held count e reported, and Last. The caller holds w.mu.
func (w *watchdog) ends(e *entry, l *Lock) {
	l.endHeld, l.endLast = -e.counted, true
}

// endOf returns what l's end event carries (HoldInfo.Held and Last).
func (w *watchdog) endOf(l *Lock) (held int, last bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return l.endHeld, l.endLast
}

// notOwner ends e because Redis said its token does not hold the lock (Extend, Release), and
// reports its remaining holds lost.
func (w *watchdog) notOwner(e *entry) {
	w.mu.Lock()
	var ls lostSet
	if !e.gone {
		ls = w.lose(e, "not_owner", nil)
	}
	w.mu.Unlock()
	w.lost(ls)
}

// lostToken ends the Client's holds of key under token, if any: Redis said that token holds no
// acquisition of the lock (a re-entry found none).
func (w *watchdog) lostToken(key string, token any) {
	w.mu.Lock()
	var ls lostSet
	if e := w.held[key]; e != nil && !e.gone && e.tok == token {
		ls = w.lose(e, "not_owner", nil)
	}
	w.mu.Unlock()
	w.lost(ls)
}

// extended records a successful Extend sent at sent; it reports false when the entry was given up
// meanwhile. Renewals in flight, sent with the old TTL, are made stale: their replies cannot
// lengthen the validity beyond what the new TTL allows.
func (w *watchdog) extended(e *entry, sent time.Time, ttl time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.gone {
		return false // given up meanwhile (lost, ended): the extension changes nothing for it
	}
	e.seq++
	e.ttl = ttl
	e.valid = sent.Add(ttl - w.c.opt.drift(ttl))
	e.next = sent.Add(w.interval(ttl))
	w.schedule(e)
	return true
}

// lostSet is an entry given up by the watchdog: its locks, and why.
type lostSet struct {
	locks []*Lock
	why   string
	err   error
}

// lose removes e and returns its locks; the caller holds w.mu.
func (w *watchdog) lose(e *entry, why string, err error) lostSet {
	w.unschedule(e)
	ls := lostSet{locks: append([]*Lock(nil), e.locks...), why: why, err: err}
	if n := len(ls.locks); n > 0 {
		w.ends(e, ls.locks[n-1])
	}
	e.locks = e.locks[:0]
	return ls
}

func (w *watchdog) run() {
	defer close(w.done)
	defer w.t.Stop()
	for {
		r, _ := w.rounds.Get().(*round)
		if r == nil {
			r = new(round)
		}
		lost, ended := w.collect(time.Now(), r)
		for _, ls := range lost {
			w.lost(ls)
		}
		if len(ended) > 0 {
			w.batches.Add(1)
			go func() {
				defer w.batches.Done()
				for _, set := range ended {
					w.endHolds(set)
				}
			}()
		}
		if len(r.batch) > 0 {
			w.dispatch(r)
		} else {
			w.rounds.Put(r)
		}
		select {
		case <-w.t.C:
		case <-w.stop:
			w.batches.Wait()
			return
		}
	}
}

// close stops the scheduler and returns every entry still held.
func (w *watchdog) close() []lostSet {
	w.mu.Lock()
	w.stopped = true
	var sets []lostSet
	for len(w.h) > 0 {
		sets = append(sets, w.lose(w.h[0].e, "closed", nil))
	}
	started := w.started
	w.mu.Unlock()
	close(w.stop)
	if started {
		<-w.done
	}
	return sets
}
