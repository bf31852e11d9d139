package core

import (
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// entry is a held lock (key + owner token) as the watchdog sees it, shared by the owner's re-entries.
type entry struct {
	k     *store.Keys
	token any // owner token
	ttl   time.Duration
	valid time.Time // local validity deadline: last successful send + ttl − drift
	// until is valid in nanoseconds since the watchdog's base, read without w.mu (holdCtx.Err).
	until    atomic.Int64
	next     time.Time // next renewal
	idx      int       // heap index, -1 when not scheduled
	seq      uint64    // bumped by Extend: a renewal sent before carries an older seq
	counted  int       // holds reported to the hook as making the Client hold the lock (HoldInfo.Held)
	maxAt    time.Time // the earliest WithMaxHold deadline of its locks; zero: none
	inflight bool
	gone     bool
	lastErr  error
	one      [1]*Lock
	locks    []*Lock
}

// Place is the entry's place in the watchdog's heap (sched.Item).
func (e *entry) Place() *int { return &e.idx }

// due is when e is due in the watchdog's heap: the earliest of its next renewal (but for one in
// flight), its validity deadline and its WithMaxHold deadline (which has no timer of its own).
func (e *entry) due() time.Time { return e.dueEarly(0, 0) }

// dueEarly is due with e's validity deadline guard early and its next renewal lead early.
func (e *entry) dueEarly(guard, lead time.Duration) time.Time {
	d := e.valid.Add(-guard)
	if n := e.next.Add(-lead); !e.inflight && n.Before(d) {
		d = n
	}
	if !e.maxAt.IsZero() && e.maxAt.Before(d) {
		d = e.maxAt
	}
	return d
}

// fix places e in the heap, or moves it where its due time now puts it; the caller holds w.mu.
func (w *watchdog) fix(e *entry) {
	w.h.Set(e, e.due().Sub(w.base))
}

// setMaxAt recomputes e.maxAt from its locks.
func (e *entry) setMaxAt() {
	e.maxAt = time.Time{}
	for _, l := range e.locks {
		if !l.maxAt.IsZero() && (e.maxAt.IsZero() || l.maxAt.Before(e.maxAt)) {
			e.maxAt = l.maxAt
		}
	}
}

// setValid sets e's validity deadline to v; the caller holds w.mu.
func (w *watchdog) setValid(e *entry, v time.Time) {
	e.valid = v
	e.until.Store(int64(v.Sub(w.base)))
}

// expired reports, without w.mu, whether e's validity deadline has passed by the clock.
func (w *watchdog) expired(e *entry) bool {
	return time.Since(w.base) >= time.Duration(e.until.Load())
}

// expire ends e's holds if its validity deadline has passed (holdCtx.Err): their contexts before it
// returns, the rest in another goroutine (Err must not wait).
func (w *watchdog) expire(e *entry) {
	w.mu.Lock()
	if e.gone || w.stopped || time.Now().Before(e.valid) {
		w.mu.Unlock()
		return
	}
	ls := w.lose(e, "expired", e.lastErr)
	w.batches.Add(1) // (under w.mu, before close can mark the watchdog stopped: close waits for it)
	w.mu.Unlock()

	ended := cancelLost(ls)
	go func() {
		defer w.batches.Done()
		w.c.finishLost(ls, ended)
	}()
}

// entryOf returns l's entry, nil before the watchdog has it.
func (w *watchdog) entryOf(l *Lock) *entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	return l.entry
}
