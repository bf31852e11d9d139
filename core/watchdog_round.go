package core

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// add registers a freshly acquired Lock, sent being when its acquire request was sent; held is what
// the hook was told the acquisition adds to the locks the Client holds (HoldInfo.Held).
func (w *watchdog) add(l *Lock, sent time.Time, held int) bool {
	if l.nested {
		return w.nest(l) // renewed with the hold it is nested in (watchdog.go)
	}
	var stale lostSet
	defer func() { w.lost(stale) }() // (after w.mu is unlocked)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
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
	if l.ttl > e.ttl {
		e.ttl = l.ttl
	}
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
	if !w.started {
		w.started = true
		w.wakeAt = w.wakeFor(e.due())
		w.t = time.NewTimer(time.Until(w.wakeAt))
		go w.run()
	}
	return true
}

func (w *watchdog) run() {
	defer close(w.done)
	defer w.t.Stop()
	for {
		r, _ := w.rounds.Get().(*round)
		if r == nil {
			r = new(round)
		}
		lost, ended := w.collect(r)
		w.warnLate(r.short)
		for _, ls := range lost {
			w.lost(ls)
		}
		if len(ended) > 0 {
			w.batches.Add(1)
			go func() {
				defer w.batches.Done()
				w.endHolds(ended)
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

// A renewal round of the watchdog (watchdog.go): collect takes what is due, dispatch sends it in
// pipelined batches, renew records each renewal's outcome.

// collect takes the entries due now (and those due within a quarter of their interval, so that
// renewals travel in large batches), the entries whose validity deadline passed, and the locks
// whose WithMaxHold deadline passed. It sets the timer for the next due entry. A round can take
// tens of thousands of entries (a quarter of 100 000 locks renewed each second): every
// collectYield entries it lets the Client's acquisitions and releases, which wait for w.mu, go
// first (issue #38: they waited up to 40 ms).
// The entries and their renewals go in r's slices.
//
// It records how late the scheduler woke, and takes each entry's renewal and validity deadline
// that much earlier (its guard: watchdog_late.go). The scheduler wakes by the largest guard; an
// entry not yet due by its own (a short TTL's, or due by a WithMaxHold limit, kept exactly) is set
// aside meanwhile, so that the entries behind it are still seen on time.
func (w *watchdog) collect(r *round) (lost, ended []lostSet) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now() // (after w.mu: waiting for it makes the scheduler late too)
	w.late.observe(now, now.Sub(w.wakeAt))
	g := w.late.ahead()
	batch, items := r.batch[:0], r.items[:0]
	r.short = 0
	var aside []*entry
	defer func() { r.batch, r.items = batch, items }()
loop:
	for seen := 1; w.h.Len() > 0; seen++ {
		if seen%collectYield == 0 {
			w.mu.Unlock()
			runtime.Gosched()
			w.mu.Lock()
			if w.h.Len() == 0 {
				break
			}
		}
		e := w.h.Min()
		if g > e.ttl/4 {
			r.short = e.ttl
		}
		ahead := now.Add(w.late.guard(e.ttl))
		switch {
		case !ahead.Before(e.valid):
			lost = append(lost, w.lose(e, "expired", e.lastErr))
		case !e.maxAt.IsZero() && !now.Before(e.maxAt):
			ended = append(ended, w.ended(e, now))
		case !e.inflight && !e.next.After(now.Add(w.lead(e)+w.interval(e.ttl)/4)):
			e.inflight = true
			w.fix(e)
			batch = append(batch, e)
			items = append(items, store.RenewItem{K: e.k, Token: e.token, TTL: e.ttl, Seq: e.seq})
		case !e.due().After(now.Add(g)):
			w.h.Remove(e)
			aside = append(aside, e)
		default:
			break loop
		}
	}
	wait := time.Hour
	if w.h.Len() > 0 {
		// At least four wakes per renewal interval: each measures the timer's lateness, so that the
		// guard reflects it before a validity deadline comes (the first one, a twelfth of the TTL
		// after the first lock is taken).
		e := w.h.Min()
		wait = min(max(e.due().Sub(now.Add(g)), 0), w.interval(e.ttl)/4)
	}
	for _, e := range aside {
		if !e.gone { // (ended meanwhile, while collect let others have w.mu)
			wait = min(wait, max(w.late.wake(e, w.lead(e)).Sub(now), 0))
			w.fix(e)
		}
	}
	w.wakeAt = now.Add(wait)
	w.t.Reset(wait)
	return lost, ended
}

// round is a renewal round's entries and renewals, in slices reused from round to round
// (watchdog.rounds): a round of 25 000 renewals (a quarter of 100 000 locks renewed each second)
// would otherwise allocate about 3.6 MB, which the garbage collector then scans beside the held
// locks (issue #38: client CPU per renewal, the foreground's latency).
type round struct {
	batch []*entry
	items []store.RenewItem
	// short is the TTL of a hold whose guard collect had to cap (TTL/4 is less than the guard the
	// timer's lateness asks for): zero when none. run warns of it (warnLate).
	short time.Duration
	left  atomic.Int32 // dispatch's goroutines still sending it
}

// roundDone returns r, whose renewals are all recorded, to w.rounds, without its references to
// entries.
func (w *watchdog) roundDone(r *round) {
	if cap(r.batch) > maxRoundKept {
		return // (a round of every lock at once, after a stall: not worth keeping)
	}
	clear(r.batch)
	clear(r.items)
	r.batch, r.items = r.batch[:0], r.items[:0]
	w.rounds.Put(r)
}

// maxRoundKept is the largest round whose slices are kept for reuse.
const maxRoundKept = 1 << 16

// collectYield is how many entries collect (and renew) handle at a time under w.mu.
const collectYield = 256

// maxRenewers bounds the goroutines sending one round of renewals, whatever the number of locks.
// Two: more let a round's pipelines take both of a 2-core machine's CPUs and Redis's event loop at
// once, ahead of the foreground (issue #38: with four, a foreground acquire's p99 beside 100 000
// renewing locks was about twice as long).
const maxRenewers = 2

// dispatch sends a round of renewals as pipelines of at most batchSize scripts, on at most
// maxRenewers goroutines; the last to finish hands the round's slices back (roundDone).
func (w *watchdog) dispatch(r *round) {
	batch, items := r.batch, r.items
	size := w.c.opt.batchSize
	chunks := (len(batch) + size - 1) / size
	var next atomic.Int64
	n := min(chunks, maxRenewers)
	r.left.Store(int32(n))
	for range n {
		w.batches.Add(1)
		go func() {
			defer w.batches.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= chunks {
					break
				}
				lo, hi := i*size, min((i+1)*size, len(batch))
				w.renew(batch[lo:hi:hi], items[lo:hi:hi])
			}
			if r.left.Add(-1) == 0 {
				w.roundDone(r)
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
	ctx, cancel := context.WithDeadline(w.renewing, deadline)
	err := fromStore(w.c.st.Renew(ctx, items))
	cancel()
	w.c.reach(err)
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
		if i > 0 && i%collectYield == 0 { // (let acquisitions and releases in: see collect)
			w.mu.Unlock()
			w.mu.Lock()
		}
		if e.gone {
			continue
		}
		e.inflight = false
		it := &items[i]
		if it.Err == nil && err != nil {
			it.Err = err
		}
		it.Err = fromStore(it.Err)
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
			if e.lastErr == nil && len(e.locks) > 0 && !store.Unreached(it.Err) { // the first failure of a run: say so once (an outage: reach)
				failed = append(failed, slog.Attr{Key: e.locks[0].k.Name, Value: slog.AnyValue(it.Err)})
			}
			e.lastErr = it.Err
			now := time.Now()
			if !now.Add(w.late.guard(e.ttl)).Before(e.valid) { // (a reply as late as the deadline: end it now)
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
		w.setValid(e, v)
	}
	if it.Seq == e.seq {
		e.next = sent.Add(w.interval(ttl))
	}
}
