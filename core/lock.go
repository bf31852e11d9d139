package core

import (
	"context"
	"errors"
	"sync"
	"time"
)

const (
	stateHeld = iota
	stateReleased
	stateLost
	stateClosed // released by Client.Close
	stateEnded  // released by the watchdog: WithMaxHold's limit passed
)

// Lock is a held lock. Its methods are safe for concurrent use. Work done under the lock should use
// Context, which is cancelled the moment the lock is released or lost.
//
// The methods of a nil *Lock (what a failed acquisition returns) do not panic: Release, ReleaseSet,
// Extend and TTL return ErrNotHeld and send nothing, the accessors return zero values, and Context
// returns an already cancelled context whose cause is ErrNotHeld, so that no work proceeds under a
// lock that does not exist.
type Lock struct {
	c        *Client
	k        keys
	token    string
	tok      any // token, boxed once for the scripts
	hold     any // this hold's id among the owner's holds (see lib.lua)
	ttl      time.Duration
	lease    time.Duration // a fair grant's first lease when shorter than ttl (claim); 0: ttl
	fence    int64
	holds    int64
	fair     bool
	req      acquireReq
	acquired time.Time
	limit    time.Duration // WithMaxHold; 0: none
	maxAt    time.Time     // acquired + limit; zero: none
	outer    *Lock         // the lock held by the context this one was acquired with
	e        *entry        // shared by the reentrant Locks of one owner in this Client
	own      entry         // e, when this acquisition created it
	vctx     valueCtx      // the parent of the lock's context

	mu    sync.Mutex
	state int
	cause error
	// The lock's context is made by the first call of Context (most holders never ask for it):
	// ctx and stop, its cancel function. ended is the cause the end of the hold gave it, or gives
	// it when it is made afterwards; parentEnded says that the parent context had ended first.
	ctx         context.Context
	stop        context.CancelCauseFunc
	ended       error
	parentEnded bool
	reported    bool // the Released or Lost hook ran: the hold's one end event
	// What the hold's end event carries (HoldInfo.Held, Last): set by the watchdog, under its
	// mutex, on the hold that ends the Client's hold of the lock.
	endHeld int
	endLast bool
}

// firstLease is how long the acquisition left the lock to live in Redis from when it was sent.
func (l *Lock) firstLease() time.Duration {
	if l.lease > 0 {
		return l.lease
	}
	return l.ttl
}

type heldKey struct{}

// valueCtx carries the Lock in its context (context.WithValue without an allocation of its own).
type valueCtx struct {
	context.Context
	l *Lock
}

func (c *valueCtx) Value(key any) any {
	if _, ok := key.(heldKey); ok {
		return c.l
	}
	return c.Context.Value(key)
}

// unlinked is a context without its parent's cancellation (the values and the deadline stay).
type unlinked struct{ context.Context }

func (unlinked) Done() <-chan struct{} { return nil }
func (unlinked) Err() error            { return nil }

// heldIn returns the lock on key held by c that ctx carries, if any.
func heldIn(ctx context.Context, c *Client, key string) *Lock {
	l, _ := ctx.Value(heldKey{}).(*Lock)
	for ; l != nil; l = l.outer {
		if l.c == c && l.k.lock() == key {
			return l
		}
	}
	return nil
}

// FromContext returns the innermost Lock whose context ctx is, or derives from.
func FromContext(ctx context.Context) (*Lock, bool) {
	l, ok := ctx.Value(heldKey{}).(*Lock)
	return l, ok && l != nil
}

// Name returns the lock name.
func (l *Lock) Name() string {
	if l == nil {
		return ""
	}
	return l.k.name
}

// Key returns the Redis key of the lock.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.k.lock()
}

// Token returns the owner token. Hand it to WithOwner to re-enter the lock from elsewhere; keep it
// out of logs (whoever knows it can release the lock).
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Fence returns the fencing token: a number that strictly increases with every fresh acquisition of
// the name. Pass it to the resource the lock protects and have the resource reject writes carrying
// a smaller fence than one it has seen. Re-entering keeps the fence.
//
// A fence is the name's counter + 1, but never less than the Redis server's clock in milliseconds
// × 1000, so fences keep increasing even when Redis loses the counter (a restart without
// persistence, a failover before the counter was replicated), as long as the server clocks do not
// step back and the loss comes at least a millisecond after the last acquisition (a restart or a
// failover always takes longer). Expect large numbers (about 1.8e15 in 2026), well within int64
// and float64 precision.
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Holds returns the owner's hold count right after this acquisition: 1 for a fresh acquisition,
// more when re-entered.
func (l *Lock) Holds() int64 {
	if l == nil {
		return 0
	}
	return l.holds
}

// Reentrant reports whether this acquisition re-entered a lock the owner already held.
func (l *Lock) Reentrant() bool { return l.Holds() > 1 }

// Context returns a context derived from the one passed to Acquire (with its values and its
// cancellation) that is also cancelled when the lock is released (cause ErrReleased), lost (cause a
// *LostError), ended by WithMaxHold (cause a *MaxHoldError) or its Client closed (cause ErrClosed). Read the reason with context.Cause.
func (l *Lock) Context() context.Context {
	if l == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotHeld)
		return ctx
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil && l.vctx.Context != nil { // (nil while the Acquired hook runs)
		if l.ended == nil || l.parentEnded {
			l.ctx, l.stop = context.WithCancelCause(&l.vctx)
		} else {
			// The hold ended while its parent context was live: the context is cancelled with the
			// hold's cause, as it would have been had it been made at once, whatever the parent
			// did since.
			l.ctx, l.stop = context.WithCancelCause(unlinked{&l.vctx})
		}
		if l.ended != nil {
			l.stop(l.ended)
		}
	}
	return l.ctx
}

// cancel ends the lock's context with cause, now or, if it is not made yet, when it is.
func (l *Lock) cancel(cause error) {
	l.mu.Lock()
	if l.ended == nil {
		l.ended = cause
		if l.ctx == nil && l.vctx.Context != nil && l.vctx.Context.Err() != nil {
			// The parent ended first: so would the context have.
			l.ended, l.parentEnded = context.Cause(l.vctx.Context), true
		}
	}
	stop := l.stop
	l.mu.Unlock()
	if stop != nil {
		stop(cause)
	}
}

// TTL asks Redis for the lock's remaining time to live, checking that it is still ours. It returns
// ErrNotHeld when it is not.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, ErrNotHeld
	}
	if err := l.heldErr(); err != nil {
		return 0, err
	}
	d, ok, err := l.c.st.pttl(ctx, &l.k, l.tok, l.ttl)
	if err != nil {
		return 0, unavailable("pttl", err)
	}
	if !ok {
		return 0, ErrNotHeld
	}
	return d, nil
}

// Extend makes the lock live at least ttl (10ms to 24h) from now, if it is still ours; the watchdog
// renews with the new TTL from then on, and the lock's validity deadline follows the new TTL. It
// never shortens the TTL Redis holds (another hold of the lock, e.g. a co-owner through WithOwner,
// may count on it): a shorter TTL takes effect in Redis as the longer one runs down. It returns
// ErrNotHeld when the lock is not ours any more; the lock is then treated as lost. It does not move
// a WithMaxHold deadline.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return ErrNotHeld
	}
	if err := validTTL(ttl); err != nil {
		return err
	}
	if err := l.heldErr(); err != nil {
		return err
	}
	sent := time.Now()
	ok, err := l.c.st.extend(ctx, &l.k, l.tok, ttl)
	if err != nil {
		return unavailable("extend", err)
	}
	if !ok {
		l.c.wd.notOwner(l.e)
		return errors.Join(ErrNotHeld, l.lostCause())
	}
	l.c.wd.extended(l.e, sent, ttl)
	return nil
}

// Release gives up this hold. On the owner's last hold the lock is deleted and the next waiter
// woken. The lock's context is cancelled (cause ErrReleased) before the request is sent, so nothing
// works under the lock once someone else can hold it. Release is idempotent: after a successful
// release it returns nil and sends nothing. After the lock was lost it returns an error matching
// ErrNotHeld (and ErrLost) and sends nothing. If Redis cannot be reached the error matches
// ErrUnavailable, the lock is no longer renewed, and Release may be called again.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	return l.release(ctx, func() (int64, error) { return l.c.st.release(ctx, &l.k, l.tok, l.hold, l.fair, l.ttl) })
}

func (l *Lock) release(ctx context.Context, send func() (int64, error)) error {
	if err := l.heldErr(); err != nil {
		if l.released() {
			return nil
		}
		return err
	}
	l.cancel(ErrReleased)
	l.c.wd.detach(l)
	n, err := send()
	if err != nil {
		if short := (*ackError)(nil); errors.As(err, &short) {
			// Released (and ReleaseSet's value written), but not acknowledged by enough replicas.
			l.setState(stateReleased)
		}
		err = unavailable("release", err)
	} else if n < 0 {
		lost := &LostError{Name: l.k.name, Reason: "not_owner"}
		l.setLost(lost)
		err = errors.Join(ErrNotHeld, lost)
		l.c.wd.notOwner(l.e) // this Client's other holds of the lock are gone too
	} else {
		l.setState(stateReleased)
	}
	l.reportReleased(max(n, 0), err)
	return err
}

// ReleaseSet is Release that also sets key to value for ttl, in the same round trip and only if the
// lock is still ours: a result or completion marker is never written by a holder that lost the
// lock. key must have the lock's hash tag "{name}" as its first (see WithGuard). Errors as for
// Release; after a successful ReleaseSet, Release returns nil.
//
// With WithReplicaAck, ReleaseSet also waits for the replicas. If too few acknowledge in time, the
// value was written and the lock released all the same (Release returns nil afterwards), but the
// error, matching ErrUnavailable, says that the write may not survive a failover.
func (l *Lock) ReleaseSet(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if l == nil {
		return ErrNotHeld
	}
	if l.k.sem != nil {
		return invalid("ReleaseSet is for locks, not permits (Permits)")
	}
	if !sameSlot(key, l.k.name) {
		return invalid("key (%d bytes) must have the lock's hash tag {name} as its first", len(key))
	}
	if ttl < time.Millisecond {
		return invalid("TTL %v below 1ms", ttl)
	}
	if l.closedByClient() {
		return ErrClosed // the lock was released by Close: the value was not written
	}
	return l.release(ctx, func() (int64, error) {
		return l.c.st.releaseSet(ctx, &l.k, l.tok, l.hold, key, value, ttl, l.ttl)
	})
}

// reportReleased runs the Released hook once per Lock.
func (l *Lock) reportReleased(holds int64, err error) {
	h := l.c.hook
	if h == nil || h.Released == nil {
		return
	}
	if l.endReported() {
		held, last := l.c.wd.endOf(l)
		h.Released(l.Context(), HoldInfo{Lock: l, Held: held, Last: last, Holds: holds,
			Duration: time.Since(l.acquired), Err: err})
	}
}

// endReported marks the hold's end as reported to the hook; it reports false if it was already.
func (l *Lock) endReported() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := !l.reported
	l.reported = true
	return first
}

func (l *Lock) closedByClient() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == stateClosed
}

func (l *Lock) heldErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case stateReleased, stateClosed:
		return ErrNotHeld
	case stateLost, stateEnded:
		return errors.Join(ErrNotHeld, l.cause)
	}
	return nil
}

func (l *Lock) released() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == stateReleased || l.state == stateClosed
}

func (l *Lock) setState(s int) {
	l.mu.Lock()
	l.state = s
	l.mu.Unlock()
}

// setLost marks a held lock lost; it reports false if it was not held.
func (l *Lock) setLost(cause error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateHeld {
		return false
	}
	l.state, l.cause = stateLost, cause
	return true
}

// lostCause returns why the lock ended without a Release: a *LostError, or a *MaxHoldError.
func (l *Lock) lostCause() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == stateLost || l.state == stateEnded {
		return l.cause
	}
	return nil
}
