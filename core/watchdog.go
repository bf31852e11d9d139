package core

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core/internal/sched"
)

// watchdog is the one renewal scheduler of a Client: a heap of held locks ordered by their next
// deadline, served by one goroutine that sends due renewals in pipelined batches.
type watchdog struct {
	c *Client
	// lost ends the holds of an entry given up (Client.lost), endHolds those whose WithMaxHold
	// limit passed (Client.endHolds): the watchdog says what ends, the Client ends it.
	lost     func(lostSet)
	endHolds func([]lostSet)
	mu       sync.Mutex
	held     map[string]*entry // by lock key
	h        sched.Heap[*entry]
	base     time.Time   // the heap's due times count from it (monotonic)
	t        *time.Timer // the scheduler's timer, reset under mu (nil until the first lock)
	stop     chan struct{}
	done     chan struct{}
	batches  sync.WaitGroup
	// renewing bounds the renewals in flight, besides each one's validity deadline: close ends
	// it when its caller stops waiting for them.
	renewing    context.Context
	endRenewing context.CancelFunc
	// pipelines and scripts count renewal round trips and the scripts they carried.
	pipelines, scripts atomic.Int64
	started            bool
	stopped            bool
	wakeAt             time.Time // when the scheduler's timer fires next
	late               lateness  // how late it fires, and the guard kept for it (watchdog_late.go)
	rounds             sync.Pool // of *round: a renewal round's buffers (watchdog_round.go)
}

func newWatchdog(c *Client) *watchdog {
	w := &watchdog{c: c, lost: c.lost, endHolds: c.endHolds, held: make(map[string]*entry), stop: make(chan struct{}),
		done: make(chan struct{}), base: time.Now()}
	w.renewing, w.endRenewing = context.WithCancel(context.Background())
	return w
}

// lostSet is an entry given up by the watchdog: its locks, and why.
type lostSet struct {
	locks []*Lock
	why   string
	err   error
}

// nest adds the nested read-write hold l to the watchdog entry of its outer hold, whose renewals
// keep both; it reports false when the outer hold is ending or ended.
func (w *watchdog) nest(l *Lock) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := l.outer
	e := o.entry
	if w.stopped || e == nil || e.gone || o.closed || !slices.Contains(e.locks, o) {
		return false
	}
	e.locks = append(e.locks, l)
	l.entry = e
	e.setMaxAt()
	if e.idx >= 0 {
		w.fix(e)
		w.arm(e.due()) // (l's WithMaxHold may be due before the scheduler's next wake-up)
	}
	return true
}

func (w *watchdog) interval(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl) * w.c.opt.renewRatio)
}

// holding reports whether this client already holds key for token (a new hold of it re-enters it).
func (w *watchdog) holding(key string, token any) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.held[key]
	return e != nil && !e.gone && e.token == token && len(e.locks) > 0
}

// schedule (re)places e in the heap; the caller holds w.mu. The scheduler is woken only when e is
// due before its timer fires: a timer that fires early finds nothing to do and sleeps again.
func (w *watchdog) schedule(e *entry) {
	w.fix(e)
	w.arm(e.due())
}

// arm makes the scheduler wake no later than its guard before at, a due time (entry.due; the
// guard: watchdog_late.go); the caller holds w.mu. Resetting the timer here, rather than waking
// the scheduler to do it, keeps lock and unlock free of goroutine switches: a timer that is
// already due earlier is left alone.
func (w *watchdog) arm(at time.Time) {
	if at = w.wakeFor(at); w.t != nil && at.Before(w.wakeAt) {
		w.wakeAt = at
		w.t.Reset(time.Until(at))
	}
}

// unschedule removes e; the caller holds w.mu.
func (w *watchdog) unschedule(e *entry) {
	e.gone = true
	if e.idx >= 0 {
		w.h.Remove(e)
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
	e := l.entry
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

func (w *watchdog) validNow(l *Lock) bool { // (l's validity deadline is ahead: its lock cannot have expired)
	w.mu.Lock()
	defer w.mu.Unlock()
	return l.entry != nil && time.Now().Before(l.entry.valid)
}

// endOf returns what l's end event carries (HoldInfo.Held and Last).
func (w *watchdog) endOf(l *Lock) (held int, last bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return l.endHeld, l.endLast
}

// notOwner ends e because Redis said its token does not hold the lock (Extend, Release), and
// reports its remaining holds lost. e is nil for a hold the watchdog never saw (one given back as
// its Client closed): it has no other holds to end.
func (w *watchdog) notOwner(e *entry) {
	if e == nil {
		return
	}
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
	if e := w.held[key]; e != nil && !e.gone && e.token == token {
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
	w.setValid(e, sent.Add(ttl-w.c.opt.drift(ttl)))
	e.next = sent.Add(w.interval(ttl))
	w.schedule(e)
	return true
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

// close stops the scheduler and returns every entry still held. It waits for the renewals in
// flight until ctx ends, then cancels them: with Redis down, a renewal would wait for go-redis's
// dials until its lock's validity deadline.
func (w *watchdog) close(ctx context.Context) []lostSet {
	w.mu.Lock()
	w.stopped = true
	var sets []lostSet
	for w.h.Len() > 0 {
		sets = append(sets, w.lose(w.h.Min(), "closed", nil))
	}
	started := w.started
	w.mu.Unlock()
	close(w.stop)
	stop := context.AfterFunc(ctx, w.endRenewing)
	if started {
		<-w.done
	}
	stop()
	w.endRenewing()
	return sets
}

// ended removes from e the locks whose WithMaxHold deadline passed at now and returns them; the
// caller holds w.mu and has e in the heap. The entry is renewed on for the holds left.
func (w *watchdog) ended(e *entry, now time.Time) lostSet {
	var out []*Lock
	kept := e.locks[:0]
	for _, l := range e.locks {
		if !l.maxAt.IsZero() && !now.Before(l.maxAt) {
			out = append(out, l)
		} else {
			kept = append(kept, l)
		}
	}
	clear(e.locks[len(kept):])
	e.locks = kept
	if len(kept) == 0 {
		w.unschedule(e)
		if len(out) > 0 {
			w.ends(e, out[len(out)-1])
		}
		return lostSet{locks: out}
	}
	e.setMaxAt()
	w.fix(e)
	return lostSet{locks: out}
}
