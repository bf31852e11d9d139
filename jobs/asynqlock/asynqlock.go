package asynqlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
)

// NamePrefix is put in front of every task key to form the lock name, so that task locks do not
// collide with other locks on the same core.Client. The lock of key "42" is named "asynq:42", and
// its Redis key is "lockkit:{asynq:42}" with core's default prefix.
const NamePrefix = "asynq:"

const (
	defaultMinTTL = time.Second
	defaultMaxTTL = 10 * time.Second
	// The smallest and largest TTL core accepts.
	minTTL = 10 * time.Millisecond
	maxTTL = 24 * time.Hour
)

// Option configures Middleware.
type Option func(*options)

type options struct {
	key            KeyFunc
	minTTL, maxTTL time.Duration
	wait           time.Duration
}

// WithKey sets how a task's key is found (default ByType: tasks of one type run one at a time).
// Tasks whose key is empty run without a lock.
func WithKey(f KeyFunc) Option { return func(o *options) { o.key = f } }

// WithTTL sets the floor and the cap of the lock's TTL (defaults 1s and 10s; allowed 10ms to 24h).
// The TTL is the time left until the task's deadline (the handler context's deadline), kept within
// [floor, cap]. The watchdog renews the lock at a third of its TTL while the handler runs, so the TTL
// only matters when a worker dies: its keys stay locked for at most the TTL. It is also the holder's
// remaining time reported to contended tasks as KeyBusyError.RetryAfter, so a lower cap makes busy
// tasks retry sooner.
func WithTTL(floor, cap time.Duration) Option {
	return func(o *options) { o.minTTL, o.maxTTL = floor, cap }
}

// WithWait makes a task whose key is busy wait inside the handler for up to d (and at most until its
// deadline) before it gives up with a *KeyBusyError. The default, 0, gives up at once. A waiting task
// occupies one of the server's workers; it is woken as soon as the holder releases the key.
func WithWait(d time.Duration) Option { return func(o *options) { o.wait = d } }

// Middleware returns asynq middleware that runs every task under a lock on its key, so that tasks
// with the same key never run at once, whichever server and worker they run on. There is one holder
// per key (core has no counting semaphore yet).
//
// For each task it finds the key (WithKey) and takes the lock "asynq:"+key for a TTL that follows
// the task's deadline (WithTTL). The handler runs with the lock's context: it carries the lock
// (core.FromContext gives its fencing token) and is cancelled if the lock is lost. The lock is
// released when the handler returns, also when it panics.
//
// If another task holds the key, the task fails with a *KeyBusyError (matching ErrKeyBusy) that
// suggests when to retry; pass the server's Config.IsFailure and Config.RetryDelayFunc through
// IsFailure and RetryDelayFunc so that such retries come on time and cost no retry. With WithWait the
// task waits for the key instead. A task on its last attempt (retry count >= max retry, as for
// asynq.MaxRetry(0)) always waits, until its deadline: asynq would archive it on any error.
//
// If the lock was lost while the handler ran, the task fails with an error matching core.ErrLost,
// even if the handler returned nil: another task of the key may have run at the same time.
//
// The owner token of the lock is derived from the task's queue and ID, so a task delivered twice
// (asynq delivers at least once) re-enters the lock it already holds instead of waiting for itself.
// A consequence: whoever knows a task's ID can compute the token and release that task's lock.
//
// It returns an error matching core.ErrInvalid if c is nil or an option is out of range.
func Middleware(c *core.Client, opts ...Option) (asynq.MiddlewareFunc, error) {
	o := options{key: ByType(), minTTL: defaultMinTTL, maxTTL: defaultMaxTTL}
	for _, f := range opts {
		f(&o)
	}
	switch {
	case c == nil:
		return nil, invalid("core client is nil")
	case o.key == nil:
		return nil, invalid("key func is nil")
	case o.minTTL < minTTL || o.maxTTL > maxTTL || o.minTTL > o.maxTTL:
		return nil, invalid("TTL floor %v and cap %v must satisfy %v <= floor <= cap <= %v", o.minTTL, o.maxTTL, minTTL, maxTTL)
	case o.wait < 0:
		return nil, invalid("negative wait %v", o.wait)
	}
	m := &middleware{c: c, o: o}
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			return m.process(ctx, t, next)
		})
	}, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("lockkit: asynqlock: "+format+": %w", append(args, core.ErrInvalid)...)
}

type middleware struct {
	c *core.Client
	o options
}

func (m *middleware) process(ctx context.Context, t *asynq.Task, next asynq.Handler) (err error) {
	key, err := m.o.key(ctx, t)
	if err != nil {
		return fmt.Errorf("lockkit: asynqlock: task key: %w", err)
	}
	if key == "" {
		return next.ProcessTask(ctx, t)
	}
	l, ttl, err := m.acquire(ctx, key)
	if err != nil {
		return err
	}
	lctx := l.Context()
	defer func() {
		// A context that ended before we released means the lock was lost (or the client closed).
		ended := context.Cause(lctx)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
		rerr := l.Release(rctx)
		cancel()
		switch {
		case errors.Is(ended, core.ErrLost) || errors.Is(ended, core.ErrClosed):
			err = errors.Join(ended, err)
		case errors.Is(rerr, core.ErrLost):
			err = errors.Join(rerr, err)
		case errors.Is(rerr, core.ErrNotHeld): // the release found the lock in other hands
			err = errors.Join(&core.LostError{Name: l.Name(), Reason: "not_owner"}, rerr, err)
		}
		// Any other release error (Redis unreachable) leaves the lock to expire within its TTL; the
		// task itself is done and is not failed for it.
	}()
	return next.ProcessTask(lctx, t)
}

// acquire takes the lock of key, trying once or waiting as configured.
func (m *middleware) acquire(ctx context.Context, key string) (*core.Lock, time.Duration, error) {
	ttl := m.o.maxTTL
	if dl, ok := ctx.Deadline(); ok {
		ttl = min(time.Until(dl), ttl)
	}
	ttl = max(ttl, m.o.minTTL)
	opts := make([]core.AcquireOption, 0, 2)
	if tok, ok := ownerToken(ctx); ok {
		opts = append(opts, core.WithOwner(tok))
	}
	name := NamePrefix + key
	var (
		l   *core.Lock
		err error
	)
	switch {
	case lastAttempt(ctx):
		l, err = m.c.Acquire(ctx, name, ttl, opts...) // until the task's deadline
	case m.o.wait > 0:
		l, err = m.c.Acquire(ctx, name, ttl, append(opts, core.WithWait(m.o.wait))...)
	default:
		l, err = m.c.TryAcquire(ctx, name, ttl, opts...)
	}
	if err == nil {
		return l, ttl, nil
	}
	var na *core.NotAcquiredError
	if errors.As(err, &na) {
		return nil, 0, &KeyBusyError{Key: key, RetryAfter: na.RetryAfter, err: err}
	}
	return nil, 0, fmt.Errorf("lockkit: asynqlock: lock %q: %w", name, err)
}

// lastAttempt reports whether asynq would archive the task on any error.
func lastAttempt(ctx context.Context) bool {
	n, ok1 := asynq.GetRetryCount(ctx)
	limit, ok2 := asynq.GetMaxRetry(ctx)
	return ok1 && ok2 && n >= limit
}

// ownerToken derives the lock's owner token from the task's queue and ID: 38 bytes, whatever their
// length. Outside an asynq server (no task ID) there is none and each call gets a fresh token.
func ownerToken(ctx context.Context) (string, bool) {
	id, ok := asynq.GetTaskID(ctx)
	if !ok || id == "" {
		return "", false
	}
	q, _ := asynq.GetQueueName(ctx)
	h := sha256.New()
	h.Write([]byte(q))
	h.Write([]byte{0})
	h.Write([]byte(id))
	var sum [sha256.Size]byte
	return "asynq:" + hex.EncodeToString(h.Sum(sum[:0])[:16]), true
}
