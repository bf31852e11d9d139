package core

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// A hold's state: held until it ends (end.go), and then why.
const (
	stateHeld     holdState = iota
	stateReleased           // Release, ReleaseSet
	stateLost               // Redis said the lock is not ours, or renewals missed the validity deadline
	stateClosed             // released by Client.Close
	stateEnded              // released by the watchdog: WithMaxHold's limit passed
)

// holdState is a hold's state (one byte: see Lock's layout).
type holdState uint8

// Lock is a held lock. Its methods are safe for concurrent use. Work done under the lock should use
// Context, which is cancelled the moment the lock is released or lost.
//
// The methods of a nil *Lock (what a failed acquisition returns) do not panic: Release, ReleaseSet,
// Extend and TTL return ErrNotHeld and send nothing, the accessors return zero values, and Context
// returns a context already cancelled with cause ErrNotHeld.
type Lock struct {
	c      *Client
	k      store.Keys
	token  any // the owner token (a string), boxed once for the scripts
	holdID any // this hold's id among the owner's holds (see lib.lua)
	ttl    time.Duration
	lease  time.Duration // a fair grant's first lease when shorter than ttl (claim); 0: ttl
	fence  int64
	holds  int64
	// req is the acquire request while the acquisition runs (take), nil once held (issue #38).
	req      *store.AcquireReq
	acquired time.Time
	limit    time.Duration // WithMaxHold; 0: none
	maxAt    time.Time     // acquired + limit; zero: none
	outer    *Lock         // the lock held by the context this one was acquired with
	entry    *entry        // shared by the reentrant Locks of one owner in this Client
	ownEntry entry         // entry, when this acquisition created it

	vctx  valueCtx[heldKey, *Lock] // the parent of the lock's context
	mu    sync.Mutex
	cause error
	// The lock's context, made by the first call of Context, and its cancel function. ended is the
	// cause the hold's end gave it (or gives it later); parentEnded: the parent had ended first.
	ctx   context.Context
	stop  context.CancelCauseFunc
	ended error
	// What the end event of the hold that ends the Client's hold of the lock carries (HoldInfo.Held,
	// Last), under the watchdog's mutex.
	endHeld int
	// The one-byte fields last, packed in one word (issue #38: memory per held lock).
	parentEnded bool
	reported    bool // the Released or Lost hook ran: the hold's one end event
	endLast     bool // (see endHeld)
	fair        bool
	kind        kind
	// nested: a read or write hold sharing its outer hold's acquisition (see Read). closed: a read
	// or write hold that is ending, so nothing may nest in it any more (under the watchdog's mu).
	nested, closed bool
	state          holdState // (under mu)
}

// firstLease is how long the acquisition left the lock to live in Redis from when it was sent.
func (l *Lock) firstLease() time.Duration {
	return cmp.Or(l.lease, l.ttl)
}

type heldKey struct{}

// valueCtx carries v, a Lock or a LockSet, under the key K in its context (context.WithValue
// without an allocation of its own).
type valueCtx[K, V any] struct {
	context.Context
	v V
}

func (c *valueCtx[K, V]) Value(key any) any {
	if _, ok := key.(K); ok {
		return c.v
	}
	return c.Context.Value(key)
}

// holdCtx is a Lock's context. Past the hold's validity deadline its Err ends the hold (an "expired"
// *LostError) without waiting for the watchdog's timer, late in a process starved of CPU (#44).
type holdCtx struct {
	context.Context // the cancellable context
	l               *Lock
	e               atomic.Pointer[entry] // l.entry, once the watchdog has it
}

func (c *holdCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}

	w := c.l.c.wd
	e := c.e.Load()
	if e == nil {
		if e = w.entryOf(c.l); e == nil {
			return nil
		}
		c.e.Store(e)
	}
	if !w.expired(e) {
		return nil
	}

	w.expire(e)
	// The hold may be ending by another way meanwhile: its cause is the one that end recorded.
	c.l.mu.Lock()
	cause, stop := c.l.ended, c.l.stop
	c.l.mu.Unlock()
	if cause != nil {
		stop(cause)
	}
	return c.Context.Err()
}

// unlinked is a context without its parent's cancellation (the values and the deadline stay).
type unlinked struct{ context.Context }

func (unlinked) Done() <-chan struct{} { return nil }
func (unlinked) Err() error            { return nil }

// FromContext returns the innermost Lock whose context ctx is, or derives from.
func FromContext(ctx context.Context) (*Lock, bool) {
	if ctx == nil {
		return nil, false
	}
	l, ok := ctx.Value(heldKey{}).(*Lock)
	return l, ok && l != nil
}

// Name returns the lock name.
func (l *Lock) Name() string {
	if l == nil {
		return ""
	}
	return l.k.Name
}

// Key returns the Redis key of the lock.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.k.Main
}

// Token returns the owner token. Hand it to WithOwner to re-enter the lock from elsewhere; keep it
// out of logs (whoever knows it can release the lock).
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	s, _ := l.token.(string)
	return s
}

// Fence returns the fencing token, which strictly increases with every fresh acquisition of the
// name (re-entering keeps it): have the resource the lock protects reject writes carrying a smaller
// fence than one it has seen. It is the name's counter + 1, but never less than the Redis server's
// clock in milliseconds × 1000, so fences keep increasing when Redis loses the counter (a restart
// without persistence, a failover before replication), as long as the server clocks do not step
// back and the loss comes a millisecond or more after the last acquisition. Expect large numbers
// (about 1.8e15 in 2026), well within int64 and float64 precision.
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Holds returns the owner's hold count right after this acquisition: 1, or more for a re-entry.
func (l *Lock) Holds() int64 {
	if l == nil {
		return 0
	}
	return l.holds
}

// Context returns a context derived from the one passed to Acquire (with its values and its
// cancellation) that is also cancelled when the lock is released (cause ErrReleased), lost (cause
// a *LostError), ended by WithMaxHold (cause a *MaxHoldError) or its Client closed (cause
// ErrClosed); context.Cause reads the reason. Its Err also reads the clock: past the hold's
// validity deadline, Err ends the hold (an expired *LostError), even when the watchdog's timer
// runs late in a process starved of CPU. Check Err before each step of work that must not outlive
// the lock (docs/guarantees.md, "Late timers").
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
			var ctx context.Context
			ctx, l.stop = context.WithCancelCause(&l.vctx)
			l.ctx = &holdCtx{Context: ctx, l: l}
		} else {
			// Ended while its parent was live: cancelled with the hold's cause, whatever the parent did.
			l.ctx, l.stop = context.WithCancelCause(unlinked{&l.vctx})
		}
		if l.ended != nil {
			l.stop(l.ended)
		}
	}
	return l.ctx
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

// lostCause returns why the lock ended without a Release: a *LostError, or a *MaxHoldError.
func (l *Lock) lostCause() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == stateLost || l.state == stateEnded {
		return l.cause
	}
	return nil
}
