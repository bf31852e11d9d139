package core

import (
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// entry is one held lock (key + owner token) as the watchdog sees it. Reentrant Locks of the same
// owner in this client share it.
type entry struct {
	k     *store.Keys
	token any // owner token
	ttl   time.Duration
	valid time.Time // local validity deadline: last successful send + ttl − drift
	// until is valid in nanoseconds since the watchdog's base, for a hold's context to read
	// without w.mu (holdCtx.Err).
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

// due is when e is due in the watchdog's heap: the earliest of its next renewal (its validity
// deadline while a renewal is in flight), its validity deadline and its locks' maximum-hold
// deadlines. WithMaxHold's deadlines live in the heap this way, with no timer of their own.
func (e *entry) due() time.Time {
	d := e.next
	if e.inflight || e.valid.Before(d) {
		d = e.valid
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

// expired reports whether e's validity deadline has passed, by the clock, without w.mu: the
// watchdog's timer may not have fired yet for it.
func (w *watchdog) expired(e *entry) bool {
	return time.Since(w.base) >= time.Duration(e.until.Load())
}

// expire ends e's holds if its validity deadline has passed: a hold's context found so (holdCtx.Err)
// before the watchdog's timer fired for it, as happens in a process starved of CPU. The contexts
// are cancelled before it returns; the loss is reported and the lock given back by another
// goroutine, as the watchdog does (Err must not run the hook or wait).
func (w *watchdog) expire(e *entry) {
	w.mu.Lock()
	if e.gone || w.stopped || time.Now().Before(e.valid) {
		w.mu.Unlock()
		return
	}
	ls := w.lose(e, "expired", e.lastErr)
	w.batches.Add(1) // (under w.mu, before close can mark the watchdog stopped: run waits for it)
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
