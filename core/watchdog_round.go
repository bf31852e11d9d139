package core

import (
	"cmp"
	"context"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// add registers a freshly acquired Lock, sent being when its acquire request was sent; held is what
// the hook was told the acquisition adds to the locks the Client holds (HoldInfo.Held).
func (w *watchdog) add(l *Lock, sent time.Time, held int) bool {
	var stale lostSet
	defer func() { w.c.lost(stale) }() // (after w.mu is unlocked)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}

	if o := l.outer; l.nested {
		// A read-write hold nested in o is renewed with it, unless o is ending.
		e := o.entry
		if e == nil || e.gone || o.closed || !slices.Contains(e.locks, o) {
			return false
		}

		e.locks = append(e.locks, l)
		l.entry = e
		e.setMaxAt()
		if e.idx >= 0 {
			w.schedule(e) // (l's WithMaxHold may be due before the next wake-up)
		}
		return true
	}

	e := w.held[l.k.Main]
	if e != nil && !e.gone && e.token == l.token && l.holds == 1 && e.k.Fence != l.k.Fence {
		// A fresh acquisition under the token (WithToken) while this Client held an earlier one:
		// that one is gone (expired, or force-released), and its holds are lost.
		stale, e = w.lose(e, "not_owner", nil), nil
	}
	if e == nil || e.token != l.token || e.gone {
		e = &l.ownEntry
		*e = entry{k: &l.k, token: l.token, idx: -1}
		e.locks = e.one[:0]
		w.held[l.k.Main] = e
	}

	fresh := len(e.locks) == 0
	e.counted += held
	e.locks = append(e.locks, l)
	l.entry = e
	e.setMaxAt()
	e.ttl = max(e.ttl, l.ttl)

	// The script left the lock with at least l.ttl to live (a re-entry never shortens it), or a
	// fair grant's shorter first lease (see claim).
	lease := l.firstLease()
	if v := sent.Add(lease - w.c.opt.drift(lease)); v.After(e.valid) {
		w.setValid(e, v)
	}

	// A re-entry never postpones the entry's renewal: its own TTL may be far shorter than the
	// validity the entry must keep up.
	if next := sent.Add(w.interval(min(e.ttl, lease))); fresh || next.Before(e.next) {
		e.next = next
	}

	w.schedule(e)
	if w.t == nil {
		w.wakeAt = w.wakeFor(e.due())
		w.t = time.NewTimer(time.Until(w.wakeAt))
		w.batches.Go(w.run)
	}
	return true
}

func (w *watchdog) run() {
	defer w.t.Stop()
	for {
		r := w.rounds.Get().(*round)
		lost, ended := w.collect(r)
		w.warnLate(r.short)

		for _, ls := range lost {
			w.c.lost(ls)
		}
		if len(ended) > 0 {
			w.batches.Go(func() { w.c.endHolds(ended) })
		}
		if len(r.batch) > 0 {
			w.dispatch(r)
		} else {
			w.rounds.Put(r)
		}

		select {
		case <-w.t.C:
		case <-w.stop:
			return
		}
	}
}

// collect takes into r the renewals due now, or within a quarter of their interval (for large
// batches), returns the entries whose validity deadline passed and the locks whose WithMaxHold
// deadline passed, and sets the timer for the next. Deadlines are kept the guard early
// (watchdog_late.go); an entry not due by its own guard (a short TTL's, or a WithMaxHold limit,
// kept exactly) is set aside meanwhile, so that the entries behind it are seen on time. Every
// collectYield entries it lets others have w.mu (issue #38: they waited up to 40 ms).
func (w *watchdog) collect(r *round) (lost []lostSet, ended []*Lock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now() // (after w.mu: waiting for it makes the scheduler late too)
	w.late.observe(now, now.Sub(w.wakeAt))
	g := w.late.ahead()

	r.batch, r.items = r.batch[:0], r.items[:0]
	r.short = 0

loop:
	for seen := 1; w.h.Len() > 0; seen++ {
		if seen%collectYield == 0 {
			w.mu.Unlock()
			runtime.Gosched()
			w.mu.Lock()
			continue // (the heap may have changed)
		}
		e := w.h.Min()
		if g > e.ttl/4 {
			r.short = e.ttl
		}
		switch {
		case !now.Add(w.late.guard(e.ttl)).Before(e.valid):
			lost = append(lost, w.lose(e, "expired", e.lastErr))
		case !e.maxAt.IsZero() && !now.Before(e.maxAt):
			ended = append(ended, w.ended(e, now)...)
		case !e.inflight && !e.next.After(now.Add(w.lead(e)+w.interval(e.ttl)/4)):
			e.inflight = true
			w.fix(e)
			r.batch = append(r.batch, e)
			r.items = append(r.items, store.RenewItem{K: e.k, Token: e.token, TTL: e.ttl, Seq: e.seq})
		case !e.due().After(now.Add(g)):
			w.h.Remove(e)
			w.aside = append(w.aside, e)
		default:
			break loop
		}
	}

	// At least four wakes per renewal interval, each measuring the timer's lateness for the guard.
	wait := time.Hour
	if w.h.Len() > 0 {
		e := w.h.Min()
		wait = min(max(e.due().Sub(now.Add(g)), 0), w.interval(e.ttl)/4)
	}
	for _, e := range w.aside {
		if !e.gone { // (ended while collect let others have w.mu)
			wait = min(wait, max(e.dueEarly(w.late.guard(e.ttl), w.lead(e)).Sub(now), 0))
			w.fix(e)
		}
	}
	w.aside = nil

	w.wakeAt = now.Add(wait)
	w.t.Reset(wait)
	return lost, ended
}

// round is a renewal round's entries and renewals, in slices reused (watchdog.rounds): 25 000
// renewals would otherwise allocate 3.6 MB for the garbage collector to scan (issue #38).
type round struct {
	batch []*entry
	items []store.RenewItem
	// short is the TTL of a hold whose guard collect had to cap at TTL/4, for warnLate; 0: none.
	short time.Duration
	left  atomic.Int32 // dispatch's goroutines still sending it
}

// maxRoundKept is the largest round whose slices are kept for reuse.
const maxRoundKept = 1 << 16

// collectYield is how many entries collect (and renew) handle at a time under w.mu.
const collectYield = 256

// maxRenewers bounds the goroutines sending one round of renewals (issue #38: with four, an
// acquire's p99 beside 100 000 renewing locks on 2 cores doubled).
const maxRenewers = 2

// dispatch sends a round of renewals as pipelines of at most batchSize scripts, on at most
// maxRenewers goroutines; the last to finish returns r, its renewals all recorded, to w.rounds
// without its entries.
func (w *watchdog) dispatch(r *round) {
	batch, items := r.batch, r.items
	size := w.c.opt.batchSize
	chunks := (len(batch) + size - 1) / size

	var next atomic.Int64
	n := min(chunks, maxRenewers)
	r.left.Store(int32(n))
	for range n {
		w.batches.Go(func() {
			for i := int(next.Add(1)) - 1; i < chunks; i = int(next.Add(1)) - 1 {
				lo, hi := i*size, min((i+1)*size, len(batch))
				w.renew(batch[lo:hi:hi], items[lo:hi:hi])
			}
			// (a round of every lock at once, after a stall, is not worth keeping)
			if r.left.Add(-1) == 0 && cap(r.batch) <= maxRoundKept {
				clear(r.batch) // (collect takes them from length 0)
				clear(r.items)
				w.rounds.Put(r)
			}
		})
	}
}

// renew sends one pipeline of renewals and records their outcomes, telling of them after w.mu.
func (w *watchdog) renew(batch []*entry, items []store.RenewItem) {
	sent := time.Now()

	w.mu.Lock()
	deadline := slices.MinFunc(batch, func(a, b *entry) int { return a.valid.Compare(b.valid) }).valid
	w.mu.Unlock()

	w.pipelines.Add(1)
	w.scripts.Add(int64(len(items)))
	ctx, cancel := context.WithDeadline(w.renewing, deadline)
	err := fromStore(w.c.st.Renew(ctx, items))
	cancel()
	w.c.reach(err)
	took := time.Since(sent)

	var lost []lostSet
	var reports []HoldInfo // for the hook's Renewed, on the entry's outermost hold
	var failed []slog.Attr // name and error of the entries whose renewals started failing

	w.mu.Lock()
	for i, e := range batch {
		if i > 0 && i%collectYield == 0 { // (let acquisitions and releases in: see collect)
			w.mu.Unlock()
			w.mu.Lock()
		}
		if e.gone {
			continue
		}

		e.inflight = false
		it := &items[i]
		it.Err = fromStore(cmp.Or(it.Err, err))
		if w.c.hook.Renewed != nil && len(e.locks) > 0 {
			reports = append(reports, HoldInfo{Lock: e.locks[0], TTL: it.TTL, Start: sent, Duration: took,
				Renewed: it.OK, Err: it.Err})
		}
		switch {
		case it.Err == nil && it.OK:
			w.renewed(e, it, sent)
		case it.Err == nil:
			lost = append(lost, w.lose(e, "not_owner", nil))
			continue
		default:
			// The first failure of a run is said once (an outage: reach).
			if e.lastErr == nil && len(e.locks) > 0 && !store.Unreached(it.Err) {
				failed = append(failed, slog.Attr{Key: e.locks[0].k.Name, Value: slog.AnyValue(it.Err)})
			}
			e.lastErr = it.Err
			now := time.Now()
			if !now.Add(w.late.guard(e.ttl)).Before(e.valid) { // (answered as late as the deadline)
				lost = append(lost, w.lose(e, "expired", it.Err))
				continue
			}
			e.next = now.Add(min(w.interval(e.ttl)/8, 250*time.Millisecond))
		}
		w.fix(e)
	}

	if w.h.Len() > 0 {
		w.arm(w.h.Min().due())
	}
	w.mu.Unlock()

	for _, in := range reports {
		w.c.hook.Renewed(in.Lock.Context(), in)
	}
	for _, f := range failed {
		w.c.log(slog.LevelWarn, "renewal failed; retrying until the lock's validity ends", slog.String("name", f.Key),
			slog.Any("error", f.Value.Any()))
	}
	for _, ls := range lost {
		w.c.lost(ls)
	}
}

// renewed records a successful renewal sent at sent; the caller holds w.mu.
func (w *watchdog) renewed(e *entry, it *store.RenewItem, sent time.Time) {
	e.lastErr = nil
	ttl := it.TTL
	if it.Seq == e.seq {
		e.next = sent.Add(w.interval(ttl))
	} else {
		// Extend changed the TTL while this renewal was in flight: Redis keeps at least it.TTL, but
		// the holder counts on no more than the TTL it asked for last.
		ttl = min(ttl, e.ttl)
	}
	if v := sent.Add(ttl - w.c.opt.drift(ttl)); v.After(e.valid) {
		w.setValid(e, v)
	}
}
