package adapter

import (
	"context"
	"time"

	"github.com/lockkit/lockkit/core"
)

// Hold is what a unit of work holds while it runs: the lock of its one key (or one of the key's
// permits, with WithLimit), or the locks of all its keys, taken together (WithKeys). The zero Hold
// holds nothing.
type Hold struct {
	lock *core.Lock
	set  *core.LockSet
}

// Context returns the context to run the work with: the lock's, or the set's, cancelled when the
// lock (any lock of the set) is released or lost. core.FromContext gives the lock (for a set, one
// of its locks).
func (h Hold) Context() context.Context {
	if h.set != nil {
		return h.set.Context()
	}
	return h.lock.Context()
}

// Lost returns the cause if the lock (a lock of the set) was taken away or its Client closed
// before the release, else nil (see Lost).
func (h Hold) Lost() error { return Lost(h.Context()) }

// Release gives back what h holds even if ctx has ended, bounded by timeout (the TTL: after that
// the locks have expired anyway). For a set, every lock is given back, also when some were lost
// (the error then matches core.ErrLost).
func (h Hold) Release(ctx context.Context, timeout time.Duration) error {
	if h.set == nil {
		return Release(ctx, h.lock, timeout)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return h.set.Release(rctx)
}

// Acquire takes what keys (one or more distinct keys: KeysOf) name, in o's namespace, for o.TTL,
// trying once when o.Wait is 0 and else waiting up to o.Wait (never past ctx):
//
//   - one key: its lock (core.Acquire), or with a limit one of its permits (core.Permits);
//   - several keys: all of their locks or none (core.AcquireAll), deadlock-free whatever the order
//     of the keys; a limit is refused by Validate.
//
// extra holds per-call options (a mode of the lock); it is not modified. Errors are core's: a
// *core.NotAcquiredError (the key, or a key of the set, is busy), core.ErrInvalid (a key that is
// not a lock name, or too many keys), core.ErrUnavailable, core.ErrClosed, or the context's.
func (o *Options) Acquire(ctx context.Context, locks *core.Client, keys []string, extra ...core.AcquireOption) (Hold, error) {
	if len(keys) == 1 {
		if o.permits != nil {
			extra = append(extra[:len(extra):len(extra)], o.permits)
		}
		l, err := Acquire(ctx, locks, o.Namespace, keys[0], o.TTL, o.Wait, extra...)
		return Hold{lock: l}, err
	}
	opts := append(extra[:len(extra):len(extra)], core.InNamespace(o.Namespace))
	var (
		s   *core.LockSet
		err error
	)
	if o.Wait > 0 {
		s, err = locks.AcquireAll(ctx, keys, o.TTL, append(opts, core.WithWait(o.Wait))...)
	} else {
		s, err = locks.TryAcquireAll(ctx, keys, o.TTL, opts...)
	}
	return Hold{set: s}, err
}
