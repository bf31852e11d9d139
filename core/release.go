package core

import (
	"context"
	"errors"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// TTL asks Redis for the lock's remaining time to live, checking that it is still ours. It returns
// ErrNotHeld when it is not.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, ErrNotHeld
	}
	if ctx == nil {
		return 0, invalid("ctx is nil")
	}
	if err := l.heldErr(); err != nil {
		return 0, err
	}
	d, ok, err := l.c.st.TTL(ctx, store.TTLReq{Keys: &l.k, Token: l.token, LockTTL: l.ttl})
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
	if ctx == nil {
		return invalid("ctx is nil")
	}
	if err := validTTL(ttl); err != nil {
		return err
	}
	if err := l.heldErr(); err != nil {
		return err
	}
	sent := time.Now()
	_, ok, err := l.c.st.TTL(ctx, store.TTLReq{Keys: &l.k, Token: l.token, LockTTL: l.ttl, Extend: ttl})
	if err != nil {
		return unavailable("extend", err)
	}
	if !ok {
		l.c.wd.notOwner(l.entry)
		return errors.Join(ErrNotHeld, l.lostCause())
	}
	if !l.c.wd.extended(l.entry, sent, ttl) {
		// The hold ended while the extension was on its way (a loss, its maximum hold): it is
		// not held, whatever Redis answered.
		return errors.Join(ErrNotHeld, l.lostCause())
	}
	return nil
}

// Release gives up this hold. On the owner's last hold the lock is freed and the next waiter
// woken. The lock's context is cancelled (cause ErrReleased) before the request is sent, so nothing
// works under the lock once someone else can hold it. Release is idempotent: after a successful
// release it returns nil and sends nothing. After the lock was lost it returns an error matching
// ErrNotHeld (and ErrLost) and sends nothing. If Redis cannot be reached the error matches
// ErrUnavailable, the lock is no longer renewed, and Release may be called again.
//
// Release is not cut short by ctx: it sends the release with ctx's values (so that tracing spans
// nest under the caller's), but without its cancellation or deadline, bounded instead by a timeout
// of its own: 5 seconds, or the lock's TTL if that is shorter (by then the lock has expired
// anyway). So `defer l.Release(r.Context())` frees the lock even when the request's client has
// gone away, instead of leaving it held for its TTL while others wait. (A context that can never
// end, such as context.Background(), is used as it is: the go-redis client's timeouts bound the
// release.)
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	return l.release(ctx, nil)
}

// ReleaseSet is Release that also sets key to value for ttl, in the same round trip and only if the
// lock is still ours: a result or completion marker is never written by a holder that lost the
// lock. key must have the lock's hash tag "{name}" as its first (see WithGuard). Errors as for
// Release; like Release, it is not cut short by ctx. After a successful ReleaseSet, Release
// returns nil.
//
// With WithReplicaAck, ReleaseSet also waits for the replicas. If too few acknowledge in time, the
// value was written and the lock released all the same (Release returns nil afterwards), but the
// error, matching ErrUnavailable, says that the write may not survive a failover.
func (l *Lock) ReleaseSet(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if l == nil {
		return ErrNotHeld
	}
	if l.kind.queued() {
		return invalid("ReleaseSet is for locks, not permits (Permits) or read-write locks (Read, Write)")
	}
	if !store.SameSlot(key, l.k.Name) {
		return invalid("core.Lock.ReleaseSet: key (%d bytes) must have the lock's hash tag {name} as its first", len(key))
	}
	if ttl < time.Millisecond {
		return invalid("core.Lock.ReleaseSet: ttl must be at least 1ms, got %v", ttl)
	}
	if _, closed := l.released(); closed {
		return ErrClosed // the lock was released by Close: the value was not written
	}
	return l.release(ctx, &store.ReleaseSet{Key: key, Value: value, TTL: ttl})
}

func (l *Lock) release(ctx context.Context, set *store.ReleaseSet) error {
	if ctx == nil {
		return invalid("ctx is nil")
	}
	if err := l.heldErr(); err != nil {
		if ok, _ := l.released(); ok {
			return nil
		}
		return err
	}
	rctx, cancel := releaseContext(ctx, l.ttl)
	_, err := l.end(rctx, stateReleased, ErrReleased, giveNow, set)
	cancel()
	return err
}

// releaseTimeout bounds a release whose caller's context can end (see releaseContext).
const releaseTimeout = 5 * time.Second

// releaseContext returns the context a release asked for with ctx is sent with: ctx's values, but
// not its cancellation or its deadline (a release that a request's ended context stopped would
// leave the lock held for its TTL), bounded instead by releaseTimeout, or by ttl if shorter: the
// watchdog stops renewing the hold before the release is sent, so it expires within ttl anyway. A
// context that can never end is used as it is, which spares the release two allocations.
func releaseContext(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), min(releaseTimeout, ttl))
}

func (l *Lock) released() (ok, closed bool) { // (by Release, or by Client.Close: closed)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == stateReleased || l.state == stateClosed, l.state == stateClosed
}
