// The end of a hold: how a lock, a permit, a read or a write is given back in Redis, reported to
// the hook and detached from the watchdog, whoever ends it: Release or ReleaseSet (stateReleased),
// Client.Close (stateClosed), WithMaxHold (stateEnded) or a loss (stateLost, through endAll).
// Every hold ends in these steps, in this order (begin, then giveUp):
//
//  1. in one step under l.mu, the lock's context is cancelled with cause and the hold marked ended;
//  2. the watchdog stops renewing it;
//  3. a loss is reported to the hook (Lost) before this Client lets anybody else have the name;
//  4. the hold is given back in Redis as give says. A release that finds the lock gone makes the
//     end a loss (and, after the reply, the Client's other holds of it); a Release that cannot
//     reach Redis leaves the hold to be released again;
//  5. any other end is reported to the hook (Released), with the release's outcome.
//
// (A LockSet sends its holds' releases together: begin, one round trip per slot, finish.)

package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// giveMode says how giveUp gives a hold back in Redis.
type giveMode uint8

const (
	giveNone giveMode = iota // nothing to give back: a nested hold shares its outer hold's
	giveNow                  // release now, with giveUp's context
)

// giveUp is a hold's end's steps 4 and 5, once begin ended it.
func (l *Lock) giveUp(ctx context.Context, why holdState, give giveMode, set *store.ReleaseSet) error {
	if l.nested {
		give = giveNone // a nested read-write hold shares its outer hold's acquisition (rwlock.go)
	}

	var res store.ReleaseResult
	var err error
	if give == giveNow {
		sc := l.c.scratch.Take() // (l.k is this end's alone: begin let only one end through)
		if sc != nil {
			l.k.Lines = &sc.Lines
		}
		res, err = l.c.st.Release(ctx, store.ReleaseReq{Keys: &l.k, Token: l.token, Hold: l.holdID, Fair: l.fair,
			Write: set, LockTTL: l.ttl})
		if sc != nil {
			l.k.Lines = nil
			l.c.scratch.Put(sc, err == nil)
		}
	}

	return l.finish(why, give == giveNow, res.Left, err)
}

// begin is a hold's end's steps 1 and 2: it reports false when the hold had ended already.
func (l *Lock) begin(why holdState, cause error) bool {
	l.endNested(why, cause) // (read-write holds nested in l end first)
	l.mu.Lock()
	if l.state != stateHeld {
		l.mu.Unlock()
		return false
	}

	l.state = why
	if why != stateReleased {
		l.cause = cause
	}

	var stop context.CancelCauseFunc // (nil until Context makes the context, cancelled then)
	if l.ended == nil {
		l.ended, stop = cause, l.stop
		if l.ctx == nil && l.vctx.Context != nil && ctxDone(l.vctx.Context) {
			l.ended, l.parentEnded = context.Cause(l.vctx.Context), true // (so would the context have)
		}
	}
	l.mu.Unlock()
	if stop != nil {
		stop(cause)
	}
	l.c.wd.detach(l)
	return true
}

// finish is a hold's end's steps 4 (the reply to a release sent: the holds left n, or err) and 5.
func (l *Lock) finish(why holdState, sent bool, n int64, err error) error {
	if sent {
		l.c.reach(err)
		switch {
		case err != nil:
			// A failed Release may be called again (an AckError's released, unacknowledged).
			if _, ack := errors.AsType[*store.AckError](err); why == stateReleased && !ack {
				l.setState(stateHeld, nil)
			}
			err = unavailable("release", err)
		case n == store.Vanished && l.entry != nil && !l.c.wd.expired(l.entry):
			n = 0 // a replay after the next holder's key expired: released (store.Vanished)
		case n < 0:
			lost := &LostError{Name: l.k.Name, Reason: "not_owner"}
			l.setState(stateLost, lost)
			err = errors.Join(ErrNotHeld, lost)
			l.c.wd.notOwner(l.entry) // this Client's other holds of the lock are gone too
		}
	}

	if err != nil && why == stateEnded { // nobody waits for this release's outcome
		l.c.log(slog.LevelWarn, "releasing a hold ended by its maximum hold failed; it expires within its TTL",
			slog.String("name", l.k.Name), slog.Any("error", err))
	}
	l.reportEnd(why == stateLost, max(n, 0), err)
	return err
}

// ctxDone reports whether ctx's Done is closed (not Err: an outer hold's holdCtx.Err takes mutexes).
func ctxDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// reportEnd runs the hook's Lost (lost) or Released, once per hold.
func (l *Lock) reportEnd(lost bool, holds int64, err error) {
	report := l.c.hook.Released
	if lost {
		report = l.c.hook.Lost
	}
	if report == nil {
		return
	}

	l.mu.Lock()
	reported := l.reported
	l.reported = true
	l.mu.Unlock()
	if reported {
		return
	}

	l.c.wd.mu.Lock() // (endHeld and endLast are the watchdog's)
	held, last := l.endHeld, l.endLast
	l.c.wd.mu.Unlock()
	in := HoldInfo{Lock: l, Held: held, Last: last, Holds: holds, Duration: time.Since(l.acquired), Err: err}
	if lost {
		in.Err = l.lostCause()
	}
	report(l.Context(), in)
}

// endAll ends holds that end together (Close, WithMaxHold, nested holds; a lost entry in the same
// steps), inner holds first: their contexts derive from their outer holds'. Every context ends, and
// every loss is reported, before the first release is sent (a loss sends none). It returns the
// first release error.
func endAll(ctx context.Context, locks []*Lock, why holdState, cause func(*Lock) error, give giveMode) error {
	var first error
	for _, l := range beginAll(locks, why, cause) {
		first = cmp.Or(first, l.giveUp(ctx, why, give, nil))
	}
	return first
}

// beginAll is endAll's steps 1 and 2: it returns the holds it ended, in the order they ended.
func beginAll(locks []*Lock, why holdState, cause func(*Lock) error) []*Lock {
	depth := func(l *Lock) (d int) {
		for o := l.outer; o != nil; o = o.outer {
			d++
		}
		return d
	}
	locks = slices.Clone(locks)
	slices.SortStableFunc(locks, func(a, b *Lock) int { return depth(b) - depth(a) })
	ended := locks[:0]
	for _, l := range locks {
		if l.begin(why, cause(l)) {
			ended = append(ended, l)
		}
	}
	return ended
}

func (l *Lock) setState(s holdState, cause error) {
	l.mu.Lock()
	l.state, l.cause = s, cause
	l.mu.Unlock()
}

// giveBack releases, in the background, the hold an acquire attempt may have taken although its
// reply was lost (store.GiveBacks); after is the attempt's error.
func (c *Client) giveBack(l *Lock, after error) {
	c.backs.Give(l.k.GivenBack(l.Token()), l.token, l.holdID, l.fair, l.ttl, after)
}

// outlived gives back a hold whose acquisition was answered after its validity deadline (sent +
// TTL − drift: Redis may have run the script at any moment since) and returns an error saying so.
func (c *Client) outlived(ctx context.Context, l *Lock, sent time.Time) error {
	lease := l.firstLease()
	took := time.Since(sent)
	validity := lease - c.opt.drift(lease)
	if took < validity {
		return nil
	}

	// The lock expires at most TTL from now: there is no point in trying for longer.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl)
	l.k.Lines = nil // (its own command line: a release that fails may run on from it, see store.Scratches.Put)
	_, err := c.st.Release(rctx, store.ReleaseReq{Keys: &l.k, Token: l.token, Hold: l.holdID, Fair: l.fair, LockTTL: l.ttl})
	cancel()
	back := "the lock was given back"
	if err != nil {
		back = fmt.Sprintf("giving the lock back failed (%v); it expires within its TTL", err)
	}
	return unavailable("acquire", fmt.Errorf("the reply took %v, longer than the lock's validity (%v); %s",
		took.Round(time.Millisecond), validity, back))
}

// endHolds ends the holds whose WithMaxHold deadline passed in one watchdog round (endAll).
func (c *Client) endHolds(locks []*Lock) {
	ctx, cancel := context.WithTimeout(c.backs.Context(), 5*time.Second) // the locks expire within their TTL anyway
	defer cancel()
	cause := func(l *Lock) error { return &MaxHoldError{Name: l.k.Name, Limit: l.limit} }
	_ = endAll(ctx, locks, stateEnded, cause, giveNow)
}

// lost ends the holds of an entry the watchdog gave up, if any.
func (c *Client) lost(ls lostSet) {
	if len(ls.locks) > 0 {
		c.finishLost(ls, cancelLost(ls))
	}
}

// cancelLost is lost's steps 1 and 2 (beginAll): it returns the holds it ended.
func cancelLost(ls lostSet) []*Lock {
	return beginAll(ls.locks, stateLost, func(l *Lock) error { return &LostError{Name: l.k.Name, Reason: ls.why, Err: ls.err} })
}

// finishLost is the rest of lost, for the holds cancelLost ended (ls has one at least): the hook's
// Lost, the log line, then, for an expired hold, the give-back in the background (giveBack).
func (c *Client) finishLost(ls lostSet, ended []*Lock) {
	for _, l := range ended {
		l.reportEnd(true, 0, nil)
	}

	attrs := []slog.Attr{slog.String("name", ls.locks[0].k.Name), slog.String("reason", ls.why)}
	if ls.err != nil {
		attrs = append(attrs, slog.Any("error", ls.err))
	}
	c.log(slog.LevelWarn, "lock lost", attrs...) // (before the give-back, as the hook's Lost)
	for _, l := range ended {
		if ls.why == "expired" && !l.nested { // (a nested hold shares its outer hold's acquisition)
			// A renewal still on its way may re-extend the lock (owner-checked: nothing passed on).
			c.giveBack(l, nil)
		}
	}
}

// endNested ends the holds nested in l (read-write) with l's why and cause; none can nest afterwards.
func (l *Lock) endNested(why holdState, cause error) {
	if !l.kind.rw() {
		return
	}

	w := l.c.wd
	w.mu.Lock()
	l.closed = true
	var in []*Lock
	if e := l.entry; e != nil {
		for _, x := range e.locks {
			for o := x.outer; o != nil; o = o.outer {
				if o == l {
					in = append(in, x)
					break
				}
			}
		}
	}
	w.mu.Unlock()

	if len(in) > 0 {
		_ = endAll(context.Background(), in, why, func(*Lock) error { return cause }, giveNone)
	}
}
