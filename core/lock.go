package core

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core/internal/sched"
	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/core/internal/wait"
)

// Client takes locks on Redis. It is safe for concurrent use. One Client runs at most four
// goroutines whatever the number of locks: the renewal watchdog, the reader and writer of the
// shared release subscription, and the eviction check (eviction.go). They start when first needed
// (the eviction check with the first acquisition) and stop on Close. (A Redlock Client
// also sends its requests to the nodes from worker goroutines, as many as requests in flight; a
// worker exits after one to two seconds without work, or on Close. Pipelining (WithPipelining) uses
// the go-redis client's automatic pipeliner, built when many commands are first in flight at once,
// whose goroutines belong to the go-redis client and stop when it is closed.)
type Client struct {
	id      string       // random, published in release messages and prefixed to hold ids
	holds   atomic.Int64 // hold ids of re-entering acquisitions
	st      store.Store
	opt     options
	hook    *Hook
	wd      *watchdog
	room    *wait.Queues
	closed  atomic.Bool
	backs   *store.GiveBacks // give-backs of acquisitions whose reply was lost
	scratch *store.Scratches // what an acquisition or a release needs only while it runs
	evict   *evictionCheck   // whether the servers may evict lock keys (eviction.go)
}

// log reports msg at level with attrs, unless the Client was given a discarding logger.
func (c *Client) log(level slog.Level, msg string, attrs ...slog.Attr) {
	lg := c.opt.logger
	if !c.opt.loggerSet || lg == nil {
		lg = slog.Default()
	}
	lg.LogAttrs(context.Background(), level, "lockkit: "+msg, attrs...)
}

// A hold's state: held until it ends (see Lock.end), and then why.
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
// returns an already cancelled context whose cause is ErrNotHeld, so that no work proceeds under a
// lock that does not exist.
type Lock struct {
	c     *Client
	k     store.Keys
	token string
	tok   any // token, boxed once for the scripts
	hold  any // this hold's id among the owner's holds (see lib.lua)
	ttl   time.Duration
	lease time.Duration // a fair grant's first lease when shorter than ttl (claim); 0: ttl
	fence int64
	holds int64
	// req is the acquire request while the acquisition runs (take), nil once it ended: a held
	// lock does not keep it (issue #38: memory per held lock).
	req      *store.AcquireReq
	acquired time.Time
	limit    time.Duration // WithMaxHold; 0: none
	maxAt    time.Time     // acquired + limit; zero: none
	outer    *Lock         // the lock held by the context this one was acquired with
	e        *entry        // shared by the reentrant Locks of one owner in this Client
	own      entry         // e, when this acquisition created it
	vctx     valueCtx      // the parent of the lock's context

	mu    sync.Mutex
	cause error
	// The lock's context is made by the first call of Context (most holders never ask for it):
	// ctx and stop, its cancel function. ended is the cause the end of the hold gave it, or gives
	// it when it is made afterwards; parentEnded says that the parent context had ended first.
	ctx   context.Context
	stop  context.CancelCauseFunc
	ended error
	// What the hold's end event carries (HoldInfo.Held, Last): set by the watchdog, under its
	// mutex, on the hold that ends the Client's hold of the lock.
	endHeld int
	// The one-byte fields last, packed in one word (issue #38: memory per held lock).
	parentEnded bool
	reported    bool // the Released or Lost hook ran: the hold's one end event
	endLast     bool // (see endHeld)
	fair        bool
	kind        kind
	// nested: a read or write hold that shares its outer hold's acquisition (outer; see Read): it
	// has nothing of its own to give back in Redis. closed: a read or write hold that is ending,
	// so nothing may nest in it any more (guarded by the watchdog's mu).
	nested, closed bool
	state          holdState // (under mu)
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
		if l.c == c && l.k.Main == key {
			return l
		}
	}
	return nil
}

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
// more when it re-entered a lock the owner already held.
func (l *Lock) Holds() int64 {
	if l == nil {
		return 0
	}
	return l.holds
}

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
	// pipelines and scripts count renewal round trips and the scripts they carried.
	pipelines, scripts atomic.Int64
	started            bool
	stopped            bool
	wakeAt             time.Time // when the scheduler's timer fires next
	rounds             sync.Pool // of *round: a renewal round's buffers (watchdog_round.go)
}

// lostSet is an entry given up by the watchdog: its locks, and why.
type lostSet struct {
	locks []*Lock
	why   string
	err   error
}

// entry is one held lock (key + owner token) as the watchdog sees it. Reentrant Locks of the same
// owner in this client share it.
type entry struct {
	k        *store.Keys
	tok      any // owner token
	ttl      time.Duration
	valid    time.Time // local validity deadline: last successful send + ttl − drift
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
