package core

import (
	"context"
	"errors"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// TTL asks Redis for the lock's remaining time to live; ErrNotHeld when the lock is not ours.
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

// Extend makes the lock live at least ttl (10ms to 24h) from now, if it is still ours; renewals
// and the validity deadline follow the new TTL. It never shortens the TTL Redis holds (a co-owner
// may count on it): a shorter TTL takes effect as the longer one runs down. It returns ErrNotHeld
// when the lock is not ours any more (it is then treated as lost). It does not move a WithMaxHold
// deadline.
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
	}
	// Not ours, or the hold ended while the extension was on its way: not held, whatever Redis said.
	if !ok || !l.c.wd.extended(l.entry, sent, ttl) {
		return errors.Join(ErrNotHeld, l.lostCause())
	}
	return nil
}

// Release gives up this hold. On the owner's last hold the lock is freed and the next waiter
// woken. The lock's context is cancelled (cause ErrReleased) before the request is sent. Release is
// idempotent: after a successful release it returns nil, after a loss an error matching ErrNotHeld
// (and ErrLost), and sends nothing. If Redis cannot be reached the error matches ErrUnavailable,
// the lock is no longer renewed, and Release may be called again.
//
// Release keeps ctx's values (tracing spans), not its cancellation or deadline: it is bounded by
// 5 s, or the lock's TTL if shorter, so `defer l.Release(r.Context())` frees the lock even when the
// request's client has gone away. (A context that can never end is used as it is: go-redis's
// timeouts bound the release.)
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	return l.release(ctx, nil)
}

// ReleaseSet is Release that also sets key to value for ttl, in the same round trip and only if the
// lock is still ours: a holder that lost the lock never writes its result. key must have the lock's
// hash tag "{name}" as its first (see WithGuard). Errors and ctx as for Release, which returns nil
// after it. With WithReplicaAck, it also waits for the replicas: if too few acknowledge in time,
// the value is written and the lock released all the same, but the error, matching
// ErrUnavailable, says that the write may not survive a failover.
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
	if ok, err := l.releasing(); !ok {
		return err
	}

	rctx, cancel := releaseContext(ctx, l.ttl)
	defer cancel()
	return l.giveUp(rctx, stateReleased, giveNow, set)
}

// releasing begins a Release's end of l, or returns what the Release returns instead: nil when the
// hold was released already (Release is idempotent), else why it is not held.
func (l *Lock) releasing() (bool, error) {
	if err := l.heldErr(); err != nil {
		if ok, _ := l.released(); ok {
			return false, nil
		}
		return false, err
	}
	return l.begin(stateReleased, ErrReleased), nil
}

// releaseTimeout bounds a release whose caller's context can end (see releaseContext).
const releaseTimeout = 5 * time.Second

// releaseContext returns the context a release asked for with ctx is sent with (see Release; past
// ttl the hold, no longer renewed, has expired anyway).
func releaseContext(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), min(releaseTimeout, ttl))
}

// released reports whether the hold was released, by Release or by Client.Close (closed).
func (l *Lock) released() (ok, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == stateReleased || l.state == stateClosed, l.state == stateClosed
}
