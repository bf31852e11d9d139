package core

import (
	"context"
	"errors"
	"github.com/lockkit/lockkit/core/internal/wait"
	"io"
	"net"
	"syscall"
	"time"
)

// store is the seam between the lock logic and Redis: node talks to one go-redis client
// (standalone, Sentinel or Cluster), redlock fans out to independent nodes. Both run the scripts of
// core/internal/script.
type store interface {
	acquire(ctx context.Context, k *keys, r *acquireReq) (acquireResult, error)
	// release drops one hold of token (with set, also writes set.value under set.key, only if the
	// token still holds the lock: ReleaseSet); it returns the holds left, or -1 when token does not
	// hold the lock. fair hands the lock to the first waiter of the Redis-side queue. lockTTL (the
	// lock's TTL) sets Redlock's per-node timeout, here and in pttl.
	release(ctx context.Context, k *keys, token, hold any, fair bool, set *releaseSet, lockTTL time.Duration) (int64, error)
	// renew fills in ok/err of every item; it returns an error when the whole batch failed.
	renew(ctx context.Context, items []renewItem) error
	// pttl returns the remaining TTL, or ok=false when token does not hold the lock.
	pttl(ctx context.Context, k *keys, token any, lockTTL time.Duration) (time.Duration, bool, error)
	extend(ctx context.Context, k *keys, token any, ttl time.Duration) (bool, error)
	// dequeue takes the waiter of r out of the Redis-side queue (fair mode, permits), handing on a
	// lock or permit a release granted it meanwhile.
	dequeue(ctx context.Context, k *keys, r *acquireReq) error
	// inspect reads the lock without changing anything (Client.Inspect); forceRelease deletes it
	// and publishes msg, or wakes the fair queue's head (Client.ForceRelease).
	// lock and sem are the name's keys as a lock and as a semaphore.
	inspect(ctx context.Context, lock, sem *keys) (LockInfo, error)
	forceRelease(ctx context.Context, lock, sem *keys, msg string) (bool, error)
	// takeAll is one all-or-nothing attempt on the locks ks (names of one slot) for r's token;
	// releaseAll releases one hold of token on each (AcquireAll, LockSet.Release).
	takeAll(ctx context.Context, ks []*keys, r *acquireReq) (setResult, error)
	releaseAll(ctx context.Context, ks []*keys, token, hold any, fences []int64) ([]int64, error)
	// router tells where release channels are subscribed.
	router() wait.Router
	// caps says what the store can do; close stops its background work (Client.Close).
	caps() caps
	close()
}

// caps are what a store can do, or does itself.
type caps struct {
	// fair and permits: fair mode (a Redis-side queue) and semaphores. Not over Redlock: each
	// node would keep its own queue, and majorities of nodes do not bound a count. sets:
	// AcquireAll (not over Redlock, see AcquireAll).
	fair, permits, sets bool
	// attemptHolds: each acquire attempt after the first takes its own hold id (Redlock: a
	// failed attempt's late give-back must drop only its own hold on a node).
	attemptHolds bool
	// undoes: the store gives back what a failed or unanswered attempt may have taken itself
	// (Redlock), so the Client does not.
	undoes bool
	// reentryFence: a re-entry names the fence of the acquisition it enters; off where nodes may
	// record different fences for one acquisition (Redlock).
	reentryFence bool
}

// releaseSet is what ReleaseSet writes with the release.
type releaseSet struct {
	key   string
	value []byte
	ttl   time.Duration
}

type acquireResult struct {
	ok         bool
	fence      int64
	holds      int64
	retryAfter time.Duration
	busy       bool   // another owner holds the lock, for retryAfter more (0: it is about to expire)
	epoch      int64  // the caller is queued in Redis (fair lock, semaphore), since EPOCH (queue.lua)
	guarded    bool   // the guard key exists; nothing was taken
	value      string // the guard key's value
	notHeld    bool   // a re-entry found no acquisition of its token to enter (lk_entry in lock.lua)
}

// acquireReq is one acquire attempt.
type acquireReq struct {
	token     any
	hold      any // this hold's id, unique among the owner's holds
	ttl       time.Duration
	fair      bool
	waiterTTL time.Duration // fair lock, semaphore: the queue timeout; 0 tries without queueing
	guard     string        // WithGuard's key; "" without a guard
	floor     int64         // fence floor in µs chosen by the client (Redlock); 0: the server's clock
	ttlArg    any           // ms(ttl), boxed once (nil: boxed per call)
	floorArg  any           // floor, boxed once (nil: boxed per call)
	limit     int           // a semaphore's permits (Permits); 0 for a lock
	waiting   waitMark      // what the acquire script records about the caller's waiting
	// entry marks a re-entry (through a lock's context, or WithOwner): the fence of the acquisition
	// it enters, or "0" for any acquisition of the token. nil: the call may take the lock afresh.
	entry any
}

// waitMark tells the acquire script whether a release of the lock must be published.
type waitMark uint8

const (
	markNone    waitMark = iota // TryAcquire: nobody waits for this call's sake
	markWaiting                 // a waiting call found the lock taken: its release must publish
	markWaited                  // a call that waited takes the lock: others may wait behind it
)

// arg is the mark as acquire.lua's waiting argument.
func (m waitMark) arg() any {
	switch m {
	case markWaiting:
		return "1"
	case markWaited:
		return "2"
	}
	return "0"
}

var errAcquireReply = errors.New("unexpected acquire reply")

// parseAcquire reads the reply of an acquire script (acquire.lua, acquire_fair.lua, sem_acquire.lua).
func parseAcquire(v any) (acquireResult, error) {
	switch x := v.(type) {
	case int64:
		if x > 0 {
			return acquireResult{ok: true, fence: x, holds: 1}, nil
		}
		return acquireResult{busy: true, retryAfter: time.Duration(-1-x) * time.Millisecond}, nil
	case []any:
		switch {
		case len(x) == 3 && x[1] == "queued":
			w, _ := x[0].(int64)
			e, _ := x[2].(int64)
			return acquireResult{busy: true, epoch: e, retryAfter: time.Duration(-1-w) * time.Millisecond}, nil
		case len(x) == 1 && x[0] == "nothold":
			return acquireResult{notHeld: true}, nil
		case len(x) == 2 && x[0] == "guarded":
			val, _ := x[1].(string)
			return acquireResult{guarded: true, value: val}, nil
		case len(x) == 2:
			f, ok1 := x[0].(int64)
			h, ok2 := x[1].(int64)
			if ok1 && ok2 {
				return acquireResult{ok: true, fence: f, holds: h}, nil
			}
		}
	}
	return acquireResult{}, errAcquireReply
}

// setResult is the outcome of one all-or-nothing attempt (takeAll): the fences, one per lock, or
// the index of the first lock held by another owner (busy >= 0) and how long it stays held.
type setResult struct {
	fences     []int64
	busy       int
	retryAfter time.Duration
}

type renewItem struct {
	k     *keys // the lock's or permit's keys (the fence: a hold renews only its acquisition)
	token any
	ttl   time.Duration
	seq   uint64 // the entry's seq when the renewal was sent
	ok    bool
	err   error
}

// mayHaveRun reports whether a script whose call failed with err may still have run in Redis: it
// was sent, and its reply was lost (a timeout, a cancellation, a broken connection). An error reply
// from Redis means it did not run; neither did a call that found no connection.
func mayHaveRun(err error) bool {
	var ne net.Error
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

func ms(d time.Duration) int64 { return int64(d / time.Millisecond) }
