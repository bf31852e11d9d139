package core

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/core/internal/wait"
)

// LockSet is a set of locks held together by one owner, taken all or nothing (AcquireAll). Each lock
// is a *Lock of its own (key, fence, renewals), and the set has one context. Its methods are safe
// for concurrent use; those of a nil *LockSet (what a failed AcquireAll returns) do not panic.
type LockSet struct {
	locks  []*Lock         // in the order the names were given
	groups [][]*Lock       // the locks of each slot, in the order they were taken
	ctx    context.Context // the set's context: the last lock's, carrying the set (SetFromContext)
}

// maxSetNames bounds the names of one AcquireAll.
const maxSetNames = 100

type setKey struct{}

// SetFromContext returns the LockSet whose context ctx is, or derives from: the innermost one when
// sets are nested. It gives a function run under a set's context (DoAll, or an adapter's WithKeys)
// every lock of the set and so every fence (LockSet.Locks), where FromContext gives one lock.
func SetFromContext(ctx context.Context) (*LockSet, bool) {
	if ctx == nil {
		return nil, false
	}
	s, ok := ctx.Value(setKey{}).(*LockSet)
	return s, ok && s != nil
}

// Locks returns the set's locks, in the order their names were given; each has its own Fence.
func (s *LockSet) Locks() []*Lock {
	if s == nil {
		return nil
	}
	return slices.Clone(s.locks)
}

// Context returns a context derived from the one passed to AcquireAll that is cancelled as soon as
// any lock of the set is released or lost, with that lock's cause (see Lock.Context). Do the work
// protected by the set under it. A lock acquired with it re-enters the set's lock of that name;
// SetFromContext returns the set from it, FromContext one of its locks.
func (s *LockSet) Context() context.Context {
	if s == nil {
		return (*Lock)(nil).Context()
	}
	return s.ctx
}

// Release gives up every lock of the set: their context is cancelled first, then the releases
// go out in one round trip per slot. A lock of the set that was lost is skipped and the others
// are released all the same; the error then matches ErrNotHeld and ErrLost. If Redis cannot be
// reached the error matches ErrUnavailable and Release may be called again. Like Lock.Release, it
// is not cut short by ctx: the releases keep ctx's values but not its cancellation or deadline,
// bounded instead by 5 seconds (or the TTL, if shorter), so that a request's ended context does
// not leave the set held for its TTL.
func (s *LockSet) Release(ctx context.Context) error {
	if s == nil {
		return ErrNotHeld
	}
	if ctx == nil {
		return invalid("ctx is nil")
	}

	c := s.locks[0].c
	ctx, cancel := releaseContext(ctx, s.locks[0].ttl)
	defer cancel()

	var errs []error
	for _, g := range slices.Backward(s.groups) {
		var live []*Lock
		var ks []*store.Keys
		for _, l := range slices.Backward(g) { // the inner contexts end first (see endAll)
			ok, err := l.releasing()
			errs = append(errs, err) // (errors.Join drops the nils)
			if ok {
				live, ks = append(live, l), append(ks, &l.k)
			}
		}
		if len(live) == 0 {
			continue
		}

		res, err := c.st.Release(ctx, store.ReleaseReq{Set: ks, Token: live[0].token, Hold: live[0].holdID,
			LockTTL: live[0].ttl})
		for i, l := range live {
			var n int64
			if err == nil {
				n = res.SetLeft[i]
			}
			errs = append(errs, l.finish(stateReleased, true, n, err))
		}
	}
	return errors.Join(errs...)
}

// AcquireAll takes every one of names (1 to 100 distinct names, each as Acquire takes it) for one
// owner, all or nothing, waiting while any of them is held by another owner: until all are
// acquired, ctx ends, or the WithWait limit passes. Either every name is held when it returns, or
// none is and nothing is left behind. Each lock keeps its own fence (LockSet.Locks); the set has
// one context, cancelled when any of its locks is lost, and its locks are renewed together.
// Overlapping sets in different orders never deadlock: an attempt never holds a name while it
// waits. On a Cluster the names are taken slot by slot (docs/guarantees.md, "Sets of locks").
//
// WithWait, WithMaxHold and InNamespace apply to every name. Fair, WithOwner, WithToken,
// WithGuard, Permits, Read and Write are refused with ErrInvalid (a set is of exclusive locks),
// and so are sets over Redlock (NewRedlock). Errors as Acquire's; a *NotAcquiredError names the
// lock found taken.
func (c *Client) AcquireAll(ctx context.Context, names []string, ttl time.Duration, opts ...AcquireOption) (*LockSet, error) {
	return c.acquireAll(ctx, names, ttl, true, opts)
}

// TryAcquireAll is AcquireAll without waiting: one attempt (one round trip per slot).
func (c *Client) TryAcquireAll(ctx context.Context, names []string, ttl time.Duration, opts ...AcquireOption) (*LockSet, error) {
	return c.acquireAll(ctx, names, ttl, false, opts)
}

// DoAll is Do for a set of names (AcquireAll): it runs fn under the set's context and releases
// every name, also when fn panics. If a lock of the set is lost while fn runs, fn's context is
// cancelled and DoAll returns an error matching ErrLost, joined with fn's error. A nil fn is
// refused with ErrInvalid, before anything is sent.
func (c *Client) DoAll(ctx context.Context, names []string, ttl time.Duration, fn func(ctx context.Context) error, opts ...AcquireOption) (err error) {
	if fn == nil {
		return invalid("core.DoAll: fn is nil")
	}
	s, err := c.AcquireAll(ctx, names, ttl, opts...)
	if err != nil {
		return err
	}

	defer func() {
		rerr := s.Release(ctx) // (not cut short by ctx)
		var lost []error
		for _, l := range s.locks {
			lost = append(lost, l.lostCause())
		}
		if errors.Join(lost...) != nil { // (a lock was lost: Join drops the nils)
			err = errors.Join(append(lost, err)...)
		} else if err == nil && !errors.Is(rerr, ErrNotHeld) {
			err = rerr
		}
	}()
	return fn(s.Context())
}

func (c *Client) acquireAll(ctx context.Context, names []string, ttl time.Duration, waits bool, opts []AcquireOption) (*LockSet, error) {
	if ctx == nil {
		return nil, invalid("ctx is nil")
	}

	ao, err := applyAcquireOptions(opts, c.opt.maxHold)
	if err != nil {
		return nil, err
	}
	switch {
	case len(names) == 0 || len(names) > maxSetNames:
		return nil, invalid("names: a set takes 1 to %d names, got %d", maxSetNames, len(names))
	case ao.fair || ao.owner != "" || ao.token != "" || ao.guard != "" || ao.permits != 0 || ao.rw != 0:
		return nil, invalid("Fair, WithOwner, WithToken, WithGuard, Permits, Read and Write cannot be used with a set (AcquireAll)")
	case !c.st.Caps().Sets:
		return nil, invalid("sets of locks (AcquireAll) are not supported over Redlock")
	}

	full := make([]string, len(names))
	for i, n := range names {
		q, err := ao.qualify(n, ttl)
		if err != nil {
			return nil, err
		}
		if slices.Contains(full[:i], q) {
			return nil, invalid("names: name %d appears twice in the set", i)
		}
		full[i] = q
	}

	if c.closed.Load() {
		return nil, ErrClosed
	}
	c.evict.start()

	sc := setCall{c: c, ao: ao, waits: waits, start: time.Now()}
	sc.Call = wait.Call{Q: c.room, Backoff: c.opt.backoffMin, MaxBack: c.opt.backoffMax}
	sc.prepare(full, ttl)
	return sc.run(ctx, full)
}
