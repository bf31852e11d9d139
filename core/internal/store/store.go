package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/lockkit/lockkit/core/internal/wait"
	"github.com/redis/go-redis/v9"
)

// Store is the seam between the lock logic and Redis (Node, Redlock). Each operation takes one
// request; errors are the store's own (a *QuorumError, ErrUnsupported, an *AckError, or
// go-redis's), which core translates in one place.
type Store interface {
	// Acquire is one attempt of r: on r.Keys, or on every lock of r.Set, all or nothing.
	Acquire(ctx context.Context, r *AcquireReq) (AcquireResult, error)
	// Release gives back what r names (see ReleaseReq).
	Release(ctx context.Context, r ReleaseReq) (ReleaseResult, error)
	// Renew fills in OK and Err of every item; it returns an error when the whole batch failed.
	Renew(ctx context.Context, items []RenewItem) error
	// TTL returns the TTL left on r.Token's hold, or sets it to r.Extend; ok: the token holds it.
	TTL(ctx context.Context, r TTLReq) (d time.Duration, ok bool, err error)
	// Inspect reads the name of r without changing anything (Client.Inspect).
	Inspect(ctx context.Context, r NameReq) (Info, error)
	// ForceRelease deletes every hold of the name and publishes r.Msg, or wakes the fair queue's
	// head; it reports whether there was a hold to delete.
	ForceRelease(ctx context.Context, r NameReq) (bool, error)
	// Caps says what the store can do, and where release channels are subscribed.
	Caps() Caps
	// Close stops the store's background work (Client.Close).
	Close()
}

// Caps are what a store can do, or does itself.
type Caps struct {
	// Fair mode (a Redis-side queue), semaphores, AcquireAll: not over Redlock, where each node
	// would keep its own queue and majorities of nodes do not bound a count (sets: see AcquireAll).
	Fair, Permits, Sets bool
	// AttemptHolds: each acquire attempt after the first takes its own hold id (Redlock: a
	// failed attempt's late give-back must drop only its own hold on a node).
	AttemptHolds bool
	// Undoes: the store itself gives back what a failed or unanswered attempt may have taken.
	Undoes bool
	// ReentryFence: a re-entry names the fence of the acquisition it enters; off where nodes may
	// record different fences for one acquisition (Redlock).
	ReentryFence bool
	// Router tells where release channels are subscribed.
	Router wait.Router
}

// ReleaseReq is one release: of one hold of Token on Keys, or on each lock of Set; or, with
// Waiter, of a waiting acquisition's place in Keys's queue, handing on what a release granted it.
type ReleaseReq struct {
	Keys        *Keys
	Set         []*Keys // in place of Keys: the locks of one slot (LockSet.Release)
	Fences      []int64 // with Set: the acquisitions' fences, one per lock (nil: the locks' own)
	Token, Hold any
	Fair        bool          // Keys is a fair lock: the release hands it to the queue's first waiter
	Write       *ReleaseSet   // also writes a value, only if Token still holds the lock (ReleaseSet)
	LockTTL     time.Duration // the lock's TTL: it sets Redlock's per-node timeout
	Waiter      *AcquireReq   // the acquisition to take out of the queue (Token and Hold are its own)
}

// ReleaseResult is what a release left: the holds of Token left on the lock (-1 when Token does
// not hold it; Vanished), or, for a set, per lock.
type ReleaseResult struct {
	Left    int64
	SetLeft []int64
}

// TTLReq reads or sets what remains of the TTL of Token's hold on Keys.
type TTLReq struct {
	Keys    *Keys
	Token   any
	LockTTL time.Duration // the lock's TTL: it sets Redlock's per-node timeout
	Extend  time.Duration // more than 0: set the TTL to this (Lock.Extend)
}

// NameReq is a name's keys as a lock and as a semaphore (a read-write lock's follow from Lock).
// Msg is what ForceRelease publishes.
type NameReq struct {
	Lock, Sem *Keys
	Msg       string
}

// ErrUnsupported is what a store answers to an operation it cannot do (Redlock: fair mode, sets
// of locks); core answers ErrInvalid, and refuses such calls before they reach the store.
var ErrUnsupported = errors.New("not supported over Redlock")

// QuorumError is a Redlock operation that did not reach a quorum (core.QuorumError says it all).
type QuorumError struct {
	Op                         string
	Nodes, Quorum, OK, Refused int
	Errs                       []string
}

func (e *QuorumError) Error() string { return "redlock " + e.Op + ": no quorum" }

// ReleaseSet is what ReleaseSet writes with the release.
type ReleaseSet struct {
	Key   string
	Value []byte
	TTL   time.Duration
}

// AcquireResult is the outcome of an acquire attempt.
type AcquireResult struct {
	OK         bool
	Fence      int64
	Fences     []int64 // a set's: one per lock, in the order of AcquireReq.Set
	BusyAt     int     // a set's: the index of the first lock another owner holds (with Busy)
	Holds      int64
	RetryAfter time.Duration
	Busy       bool   // another owner holds the lock, for retryAfter more (0: it is about to expire)
	Epoch      int64  // the caller is queued in Redis (fair lock, semaphore), since EPOCH (queue.lua)
	Guarded    bool   // the guard key exists; nothing was taken
	Value      string // the guard key's value
	NotHeld    bool   // a re-entry found no acquisition of its token to enter (lk_entry in lock.lua)
	// Split: over Redlock, fewer than a quorum of nodes granted the attempt, which gave them back;
	// a split vote, whose give-backs wake no waiter: the lock may be free a round trip later.
	Split bool
}

// AcquireReq is one acquire attempt.
type AcquireReq struct {
	Keys      *Keys   // the lock, fair lock or semaphore
	Set       []*Keys // in place of Keys: the locks of a set, names of one slot (AcquireAll)
	Token     any
	Hold      any // this hold's id, unique among the owner's holds
	TTL       time.Duration
	Fair      bool
	WaiterTTL time.Duration // fair lock, semaphore: the queue timeout; 0 tries without queueing
	Guard     string        // WithGuard's key; "" without a guard
	Floor     any           // the client's fence floor in µs (Redlock); nil: the server's clock
	TTLArg    any           // ms(ttl), boxed once (nil: boxed per call)
	Limit     int           // a semaphore's permits (Permits); 0 for a lock
	Waiting   WaitMark      // what the acquire script records about the caller's waiting
	// Entry marks a re-entry: the fence of the acquisition it enters, or "0" for any acquisition
	// of the token; nil: the call may take the lock afresh.
	Entry any
}

// WaitMark tells the acquire script whether a release of the lock must be published.
type WaitMark uint8

const (
	MarkNone    WaitMark = iota // TryAcquire: nobody waits for this call's sake
	MarkWaiting                 // a waiting call found the lock taken: its release must publish
	MarkWaited                  // a call that waited takes the lock: others may wait behind it
)

// arg is the mark as acquire.lua's waiting argument.
func (m WaitMark) arg() any { return [...]any{"0", "1", "2"}[m] }

var errAcquireReply = errors.New("unexpected acquire reply")

// parseAcquire reads the reply of an acquire script (acquire.lua, acquire_fair.lua, sem_acquire.lua).
func parseAcquire(v any) (AcquireResult, error) {
	switch x := v.(type) {
	case int64:
		if x > 0 {
			return AcquireResult{OK: true, Fence: x, Holds: 1}, nil
		}
		return AcquireResult{Busy: true, RetryAfter: time.Duration(-1-x) * time.Millisecond}, nil
	case []any:
		switch {
		case len(x) == 3 && x[1] == "queued":
			w, _ := x[0].(int64)
			e, _ := x[2].(int64)
			return AcquireResult{Busy: true, Epoch: e, RetryAfter: time.Duration(-1-w) * time.Millisecond}, nil
		case len(x) == 1 && x[0] == "nothold":
			return AcquireResult{NotHeld: true}, nil
		case len(x) == 2 && x[0] == "guarded":
			val, _ := x[1].(string)
			return AcquireResult{Guarded: true, Value: val}, nil
		case len(x) == 2:
			f, ok1 := x[0].(int64)
			h, ok2 := x[1].(int64)
			if ok1 && ok2 {
				return AcquireResult{OK: true, Fence: f, Holds: h}, nil
			}
		}
	}
	return AcquireResult{}, errAcquireReply
}

// RenewItem is one renewal of a batch (Store.Renew).
type RenewItem struct {
	K     *Keys // the lock's or permit's keys (the fence: a hold renews only its acquisition)
	Token any
	TTL   time.Duration
	Seq   uint64 // the entry's seq when the renewal was sent
	OK    bool
	Err   error
}

// MayHaveRun reports whether a script whose call failed with err may still have run in Redis: it
// was sent, and its reply was lost (a timeout, a cancellation, a broken connection). An error reply
// from Redis means it did not run; neither did a call that found no connection (a failed dial).
func MayHaveRun(err error) bool {
	return err != nil && !notSent(err) && (ended(err) || broken(err))
}

// MS is d in whole milliseconds, as the scripts take times.
func MS(d time.Duration) int64 { return int64(d / time.Millisecond) }

// notSent reports whether err says the command never reached Redis: the dial failed (a
// *net.OpError whose Op is "dial"), or no connection was free in the pool in time.
func notSent(err error) bool {
	var op *net.OpError
	return (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, redis.ErrPoolTimeout)
}

// ended reports whether err says the caller's context ended.
func ended(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// broken reports whether err says the connection broke, closed or timed out.
func broken(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Unreached reports whether err says Redis could not be reached: no connection (notSent), or a
// broken one. An error reply is an answer, and an ended context says nothing about Redis.
func Unreached(err error) bool {
	return err != nil && (notSent(err) || !ended(err) && broken(err))
}

// Refused returns why Redis refused a command for good, or "": "credentials" (WRONGPASS,
// NOAUTH), "permission" (NOPERM, or a command a script runs that the ACL user lacks) or "command"
// (unknown to the server, or renamed away).
func Refused(err error) string {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return ""
	}
	msg := re.Error()
	switch {
	case redis.IsAuthError(re):
		return "credentials"
	case strings.HasPrefix(msg, "NOPERM"), strings.HasPrefix(msg, "ERR The user executing the script can't run"):
		return "permission"
	case strings.HasPrefix(msg, "ERR unknown command"), strings.HasPrefix(msg, "ERR Unknown Redis command called from script"):
		return "command"
	}
	return ""
}
