package core

import (
	"container/heap"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
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
	t              *time.Timer // the scheduler's timer, reset under mu (nil until the first lock)
	stop           chan struct{}
	done           chan struct{}
	batches        sync.WaitGroup
	// pipelines and scripts count renewal round trips and the scripts they carried.
	pipelines, scripts atomic.Int64
	started            bool
	stopped            bool
	wakeAt             time.Time // when the scheduler's timer fires next
}

func newWatchdog(c *Client) *watchdog {
	return &watchdog{c: c, lost: c.lost, endHolds: c.endHolds, held: make(map[string]*entry), stop: make(chan struct{}),
		done: make(chan struct{})}
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
	if e.idx < 0 {
		heap.Push(&w.h, e)
	} else {
		heap.Fix(&w.h, e.idx)
	}
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
		heap.Remove(&w.h, e.idx)
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
			heap.Fix(&w.h, e.idx)
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
		batch, items, lost, ended := w.collect(time.Now())
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
		if len(batch) > 0 {
			w.dispatch(batch, items)
		}
		select {
		case <-w.t.C:
		case <-w.stop:
			w.batches.Wait()
			return
		}
	}
}

// collect takes the entries due now (and those due within a quarter of their interval, so that
// renewals travel in large batches), the entries whose validity deadline passed, and the locks
// whose WithMaxHold deadline passed. It sets the timer for the next due entry.
func (w *watchdog) collect(now time.Time) (batch []*entry, items []store.RenewItem, lost, ended []lostSet) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.h) > 0 {
		e := w.h[0]
		if !now.Before(e.valid) {
			lost = append(lost, w.lose(e, "expired", e.lastErr))
			continue
		}
		if !e.maxAt.IsZero() && !now.Before(e.maxAt) {
			ended = append(ended, w.ended(e, now))
			continue
		}
		if e.inflight || e.next.After(now.Add(w.interval(e.ttl)/4)) {
			break
		}
		e.inflight = true
		heap.Fix(&w.h, 0)
		batch = append(batch, e)
		items = append(items, store.RenewItem{K: e.k, Token: e.tok, TTL: e.ttl, Seq: e.seq})
	}
	wait := time.Hour
	if len(w.h) > 0 {
		wait = max(w.h[0].due().Sub(now), 0)
	}
	w.wakeAt = now.Add(wait)
	w.t.Reset(wait)
	return batch, items, lost, ended
}

// maxRenewers bounds the goroutines sending one round of renewals, whatever the number of locks.
const maxRenewers = 4

// dispatch sends a round of renewals as pipelines of at most batchSize scripts, on at most
// maxRenewers goroutines.
func (w *watchdog) dispatch(batch []*entry, items []store.RenewItem) {
	size := w.c.opt.batchSize
	chunks := (len(batch) + size - 1) / size
	var next atomic.Int64
	for range min(chunks, maxRenewers) {
		w.batches.Add(1)
		go func() {
			defer w.batches.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= chunks {
					return
				}
				lo, hi := i*size, min((i+1)*size, len(batch))
				w.renew(batch[lo:hi:hi], items[lo:hi:hi])
			}
		}()
	}
}

func (w *watchdog) renew(batch []*entry, items []store.RenewItem) {
	sent := time.Now()
	w.mu.Lock()
	deadline := batch[0].valid
	for _, e := range batch {
		if e.valid.Before(deadline) {
			deadline = e.valid
		}
	}
	w.mu.Unlock()
	w.pipelines.Add(1)
	w.scripts.Add(int64(len(items)))
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	err := w.c.st.Renew(ctx, items)
	cancel()
	took := time.Since(sent)

	var lost []lostSet
	type report struct {
		l  *Lock // the entry's outermost hold
		it store.RenewItem
	}
	var reports []report
	var failed []slog.Attr // name and error of the entries whose renewals started failing
	hook := w.c.hook != nil && w.c.hook.Renewed != nil
	w.mu.Lock()
	for i, e := range batch {
		if e.gone {
			continue
		}
		e.inflight = false
		it := &items[i]
		if it.Err == nil && err != nil {
			it.Err = err
		}
		if hook && len(e.locks) > 0 {
			reports = append(reports, report{l: e.locks[0], it: *it})
		}
		switch {
		case it.Err == nil && it.OK:
			w.renewed(e, it, sent)
		case it.Err == nil:
			lost = append(lost, w.lose(e, "not_owner", nil))
			continue
		default:
			if e.lastErr == nil && len(e.locks) > 0 { // the first failure of a run: say so once
				failed = append(failed, slog.Attr{Key: e.locks[0].k.Name, Value: slog.AnyValue(it.Err)})
			}
			e.lastErr = it.Err
			e.next = time.Now().Add(min(w.interval(e.ttl)/8, 250*time.Millisecond))
		}
		heap.Fix(&w.h, e.idx)
	}
	if len(w.h) > 0 {
		w.arm(w.h[0].due())
	}
	w.mu.Unlock()
	for _, r := range reports {
		w.c.hook.Renewed(r.l.Context(), HoldInfo{Lock: r.l, TTL: r.it.TTL, Start: sent, Duration: took,
			Renewed: r.it.OK, Err: r.it.Err})
	}
	for _, f := range failed {
		w.c.log(slog.LevelWarn, "renewal failed; retrying until the lock's validity ends", slog.String("name", f.Key),
			slog.Any("error", f.Value.Any()))
	}
	for _, ls := range lost {
		w.lost(ls)
	}
}

// renewed records a successful renewal sent at sent; the caller holds w.mu.
func (w *watchdog) renewed(e *entry, it *store.RenewItem, sent time.Time) {
	e.lastErr = nil
	ttl := it.TTL
	if it.Seq != e.seq {
		// Extend changed the TTL while this renewal was in flight. Redis keeps at least it.ttl from
		// when the renewal ran (renewals never shorten), but the holder counts on the TTL it asked
		// for last: never more than that.
		ttl = min(ttl, e.ttl)
	}
	if v := sent.Add(ttl - w.c.opt.drift(ttl)); v.After(e.valid) {
		e.valid = v
	}
	if it.Seq == e.seq {
		e.next = sent.Add(w.interval(ttl))
	}
}

// close stops the scheduler and returns every entry still held.
func (w *watchdog) close() []lostSet {
	w.mu.Lock()
	w.stopped = true
	var sets []lostSet
	for len(w.h) > 0 {
		sets = append(sets, w.lose(w.h[0], "closed", nil))
	}
	started := w.started
	w.mu.Unlock()
	close(w.stop)
	if started {
		<-w.done
	}
	return sets
}
