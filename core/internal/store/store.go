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

// Store is the seam between the lock logic and Redis: node talks to one go-redis client
// (standalone, Sentinel or Cluster), redlock fans out to independent nodes. Both run the scripts of
// core/internal/script.
type Store interface {
	Acquire(ctx context.Context, k *Keys, r *AcquireReq) (AcquireResult, error)
	// Release drops one hold of token (with set, also writes set.value under set.key, only if the
	// token still holds the lock: ReleaseSet); it returns the holds left, or -1 when token does not
	// hold the lock. fair hands the lock to the first waiter of the Redis-side queue. lockTTL (the
	// lock's TTL) sets Redlock's per-node timeout, here and in pttl.
	Release(ctx context.Context, k *Keys, token, hold any, fair bool, set *ReleaseSet, lockTTL time.Duration) (int64, error)
	// Renew fills in ok/err of every item; it returns an error when the whole batch failed.
	Renew(ctx context.Context, items []RenewItem) error
	// PTTL returns the remaining TTL, or ok=false when token does not hold the lock.
	PTTL(ctx context.Context, k *Keys, token any, lockTTL time.Duration) (time.Duration, bool, error)
	Extend(ctx context.Context, k *Keys, token any, ttl time.Duration) (bool, error)
	// Dequeue takes the waiter of r out of the Redis-side queue (fair mode, permits), handing on a
	// lock or permit a release granted it meanwhile.
	Dequeue(ctx context.Context, k *Keys, r *AcquireReq) error
	// Inspect reads the lock without changing anything (Client.Inspect); forceRelease deletes it
	// and publishes msg, or wakes the fair queue's head (Client.ForceRelease).
	// lock and sem are the name's keys as a lock and as a semaphore.
	Inspect(ctx context.Context, lock, sem *Keys) (Info, error)
	ForceRelease(ctx context.Context, lock, sem *Keys, msg string) (bool, error)
	// TakeAll is one all-or-nothing attempt on the locks ks (names of one slot) for r's token;
	// releaseAll releases one hold of token on each (AcquireAll, LockSet.Release).
	TakeAll(ctx context.Context, ks []*Keys, r *AcquireReq) (SetResult, error)
	ReleaseAll(ctx context.Context, ks []*Keys, token, hold any, fences []int64) ([]int64, error)
	// Router tells where release channels are subscribed.
	Router() wait.Router
	// Caps says what the store can do; close stops its background work (Client.Close).
	Caps() Caps
	Close()
}

// Caps are what a store can do, or does itself.
type Caps struct {
	// Fair and Permits: Fair mode (a Redis-side queue) and semaphores. Not over Redlock: each
	// node would keep its own queue, and majorities of nodes do not bound a count. Sets:
	// AcquireAll (not over Redlock, see AcquireAll).
	Fair, Permits, Sets bool
	// AttemptHolds: each acquire attempt after the first takes its own hold id (Redlock: a
	// failed attempt's late give-back must drop only its own hold on a node).
	AttemptHolds bool
	// Undoes: the store gives back what a failed or unanswered attempt may have taken itself
	// (Redlock), so the Client does not.
	Undoes bool
	// ReentryFence: a re-entry names the fence of the acquisition it enters; off where nodes may
	// record different fences for one acquisition (Redlock).
	ReentryFence bool
}

// ReleaseSet is what ReleaseSet writes with the release.
type ReleaseSet struct {
	Key   string
	Value []byte
	TTL   time.Duration
}

type AcquireResult struct {
	OK         bool
	Fence      int64
	Holds      int64
	RetryAfter time.Duration
	Busy       bool   // another owner holds the lock, for retryAfter more (0: it is about to expire)
	Epoch      int64  // the caller is queued in Redis (fair lock, semaphore), since EPOCH (queue.lua)
	Guarded    bool   // the guard key exists; nothing was taken
	Value      string // the guard key's value
	NotHeld    bool   // a re-entry found no acquisition of its token to enter (lk_entry in lock.lua)
	// Split: over Redlock, the attempt was granted on some nodes, fewer than a quorum, and gave
	// them back. Callers that arrived together may have split the vote, each giving its minority
	// back at once, which wakes no waiter (a waiter wakes on a release a quorum of nodes publish):
	// the lock may be free a round trip later.
	Split bool
}

// AcquireReq is one acquire attempt.
type AcquireReq struct {
	Token     any
	Hold      any // this hold's id, unique among the owner's holds
	TTL       time.Duration
	Fair      bool
	WaiterTTL time.Duration // fair lock, semaphore: the queue timeout; 0 tries without queueing
	Guard     string        // WithGuard's key; "" without a guard
	Floor     int64         // fence floor in µs chosen by the client (Redlock); 0: the server's clock
	TTLArg    any           // ms(ttl), boxed once (nil: boxed per call)
	FloorArg  any           // floor, boxed once (nil: boxed per call)
	Limit     int           // a semaphore's permits (Permits); 0 for a lock
	Waiting   WaitMark      // what the acquire script records about the caller's waiting
	// Entry marks a re-Entry (through a lock's context, or WithOwner): the fence of the acquisition
	// it enters, or "0" for any acquisition of the token. nil: the call may take the lock afresh.
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
func (m WaitMark) arg() any {
	switch m {
	case MarkWaiting:
		return "1"
	case MarkWaited:
		return "2"
	}
	return "0"
}

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

// SetResult is the outcome of one all-or-nothing attempt (takeAll): the fences, one per lock, or
// the index of the first lock held by another owner (busy >= 0) and how long it stays held.
type SetResult struct {
	Fences     []int64
	Busy       int
	RetryAfter time.Duration
}

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
	var ne net.Error
	switch {
	case err == nil, notSent(err):
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

func MS(d time.Duration) int64 { return int64(d / time.Millisecond) }

// notSent reports whether err says the command never reached Redis: no connection could be made
// (go-redis returns the dial's error, a *net.OpError whose Op is "dial": refused, unreachable, or
// its timeout), or none was free in the pool in time.
func notSent(err error) bool {
	var op *net.OpError
	return (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, redis.ErrPoolTimeout)
}

// Unreached reports whether err says Redis could not be reached: no connection (see notSent), a
// connection broken or closed, or a network timeout. An error reply is an answer (false), and so
// is an ended context, which says nothing about Redis.
func Unreached(err error) bool {
	var ne net.Error
	switch {
	case err == nil:
		return false
	case notSent(err):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Refused returns why Redis refused a command for a reason that no retry changes, or "" for any
// other error: "credentials" (WRONGPASS, NOAUTH), "permission" (NOPERM, or a command a script runs
// that the ACL user lacks) or "command" (unknown to the server, or renamed away).
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
