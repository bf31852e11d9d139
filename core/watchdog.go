package core

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core/internal/sched"
)

// watchdog is a Client's renewal scheduler: a heap of held locks by due time, served by one
// goroutine that renews them in pipelined batches and tells the Client what ends (lostSet).
type watchdog struct {
	c       *Client
	mu      sync.Mutex
	held    map[string]*entry // by lock key
	h       sched.Heap[*entry]
	base    time.Time   // the heap's due times count from it (monotonic)
	t       *time.Timer // the scheduler's timer, reset under mu (nil until the first lock)
	stop    chan struct{}
	batches sync.WaitGroup // run, and the goroutines it and expire start
	// renewing bounds the renewals in flight, besides their validity deadlines: close ends it.
	renewing    context.Context
	endRenewing context.CancelFunc
	// pipelines and scripts count renewal round trips and the scripts they carried.
	pipelines, scripts atomic.Int64
	stopped            bool
	wakeAt             time.Time // when the scheduler's timer fires next
	late               lateness  // how late it fires, and the guard kept for it (watchdog_late.go)
	rounds             sync.Pool // of *round: a renewal round's buffers (watchdog_round.go)
	aside              []*entry  // the entries collect has set aside, out of the heap
}

func newWatchdog(c *Client) *watchdog {
	w := &watchdog{c: c, held: make(map[string]*entry), stop: make(chan struct{}), base: time.Now(),
		rounds: sync.Pool{New: func() any { return new(round) }}}
	w.renewing, w.endRenewing = context.WithCancel(context.Background())
	return w
}

// lostSet is an entry given up by the watchdog: its locks, and why.
type lostSet struct {
	locks []*Lock
	why   string
	err   error
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

// schedule (re)places e in the heap and arms the timer for it; the caller holds w.mu.
func (w *watchdog) schedule(e *entry) {
	w.fix(e)
	w.arm(e.due())
}

// arm makes the timer fire no later than its guard before at, without waking the scheduler (no
// goroutine switch in lock or unlock); a timer due earlier is left alone. The caller holds w.mu.
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

// detach removes l from its entry, and ends the entry with l's end event when l was its last hold.
func (w *watchdog) detach(l *Lock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := l.entry
	if e == nil || e.gone { // (a gone entry has no locks left: lose took them)
		return
	}

	e.locks = slices.DeleteFunc(e.locks, func(x *Lock) bool { return x == l })
	if len(e.locks) == 0 {
		w.unschedule(e)
		l.endHeld, l.endLast = -e.counted, true // (see Lock.endHeld)
	} else if !e.maxAt.IsZero() {
		e.setMaxAt()
		if e.idx >= 0 {
			w.fix(e)
		}
	}
}

// notOwner ends e (nil: none), whose token Redis said does not hold the lock, and reports it lost.
func (w *watchdog) notOwner(e *entry) {
	w.mu.Lock()
	var ls lostSet
	if e != nil && !e.gone {
		ls = w.lose(e, "not_owner", nil)
	}
	w.mu.Unlock()
	w.c.lost(ls)
}

// lostToken ends the Client's holds of key under token, which Redis said holds no acquisition of it.
func (w *watchdog) lostToken(key string, token any) {
	w.mu.Lock()
	e := w.held[key]
	w.mu.Unlock()
	if e != nil && e.token == token {
		w.notOwner(e)
	}
}

// extended records a successful Extend sent at sent, or reports false for an entry given up. It
// makes the renewals in flight stale: their replies cannot lengthen the validity past the new TTL.
func (w *watchdog) extended(e *entry, sent time.Time, ttl time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.gone {
		return false
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
		ls.locks[n-1].endHeld, ls.locks[n-1].endLast = -e.counted, true
	}
	e.locks = e.locks[:0]
	return ls
}

// close stops the scheduler and returns every hold still held. It waits for the renewals in
// flight until ctx ends, then cancels them (with Redis down, they would wait for go-redis's dials).
func (w *watchdog) close(ctx context.Context) []*Lock {
	w.mu.Lock()
	w.stopped = true
	var locks []*Lock
	for w.h.Len() > 0 {
		locks = append(locks, w.lose(w.h.Min(), "closed", nil).locks...)
	}
	for _, e := range w.aside { // (collect yielded w.mu)
		if !e.gone {
			locks = append(locks, w.lose(e, "closed", nil).locks...)
		}
	}
	w.mu.Unlock()

	close(w.stop)
	stop := context.AfterFunc(ctx, w.endRenewing)
	w.batches.Wait()
	stop()
	w.endRenewing()
	return locks
}

// ended removes from e, in the heap, the locks whose WithMaxHold deadline passed at now; w.mu held.
func (w *watchdog) ended(e *entry, now time.Time) []*Lock {
	due := func(l *Lock) bool { return !l.maxAt.IsZero() && !now.Before(l.maxAt) }
	var out []*Lock
	for _, l := range e.locks {
		if due(l) {
			out = append(out, l)
		}
	}
	if len(out) == len(e.locks) {
		return w.lose(e, "", nil).locks // all of them
	}

	e.locks = slices.DeleteFunc(e.locks, due)
	e.setMaxAt()
	w.fix(e)
	return out
}
