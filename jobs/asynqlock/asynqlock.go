package asynqlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/adapter"
)

// NamePrefix starts the name of every task lock in the default namespace: the lock of key "42"
// is "@asynq/42" (core.Lock.Name), Redis key "lockkit:{@asynq/42}" with core's default prefix.
//
// Deprecated: use core.InNamespace("asynq") to take a task lock directly, and
// core.Namespaced("asynq", key) to name one: task locks live in a core namespace (WithNamespace,
// default "asynq").
const NamePrefix = "@" + defaultNamespace + "/"

const (
	defaultMinTTL    = time.Second
	defaultMaxTTL    = 10 * time.Second
	defaultNamespace = "asynq"
)

// Option configures Middleware.
type Option func(*options)

// task is what a key function reads: the handler's context and the task.
type task struct {
	ctx context.Context
	t   *asynq.Task
}

type options struct {
	adapter.KeyOptions[task] // TTL (the cap), wait, logger, namespace, limit, key
	minTTL                   time.Duration
	limitFn                  LimitFunc // WithLimitFunc
}

// WithKey sets how a task's key is found (default ByType: tasks of one type run one at a time):
// ByType, ByHeader, ByJSONField or a KeyFunc of your own. Tasks whose key is empty run without a
// lock.
func WithKey(f KeyFunc) Option {
	return func(o *options) {
		if f == nil {
			o.SetKey(nil)
			return
		}
		o.SetKey(func(in task) (string, error) { return f(in.ctx, in.t) })
	}
}

// WithTTL sets the floor and the cap of the lock's TTL (defaults 1s and 10s; allowed core.MinTTL
// to core.MaxTTL; WithTTL(d, d) fixes it at d). It takes two bounds, unlike the WithTTL of the
// other adapters, because the TTL follows each task's deadline.
// The TTL is the time left until the task's deadline (the handler context's deadline), kept within
// [floor, cap]. The watchdog renews the lock at a third of its TTL while the handler runs, so the TTL
// only matters when a worker dies: its keys stay locked for at most the TTL. It is also the holder's
// remaining time reported to contended tasks as KeyBusyError.RetryAfter, so a lower cap makes busy
// tasks retry sooner.
func WithTTL(floor, cap time.Duration) Option {
	return func(o *options) {
		o.SetTTL(cap)
		o.minTTL = floor
	}
}

// WithWait makes a task whose key is busy wait inside the handler for up to d (and at most until its
// deadline) before it gives up with a *KeyBusyError. The default, 0 (the default of every lockkit
// adapter), gives up at once, and RetryDelayFunc brings the task back when the key is due free. A
// waiting task occupies one of the server's workers; it is woken as soon as the holder releases
// the key.
func WithWait(d time.Duration) Option { return func(o *options) { o.SetWait(d) } }

// WithNamespace sets the core namespace of the task locks (default "asynq": the lock of key K is
// "@asynq/K", see core.InNamespace). A key taken from a task's payload or headers can never leave
// the namespace; give another component the same namespace only to make it exclude tasks on
// purpose. 1 to 64 of a-z, 0-9 and '-'.
func WithNamespace(ns string) Option { return func(o *options) { o.SetNamespace(ns) } }

// WithLogger sets where the middleware logs what it does not report in the task's error: a failed
// release (the lock then expires after its TTL). Default (and nil): slog.Default(), read when a
// message is logged; slog.New(slog.DiscardHandler) silences it.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.SetLogger(l) } }

// Middleware returns asynq middleware that runs every task under a lock on its key, so that tasks
// with the same key never run at once, whichever server and worker they run on. With WithLimit
// or WithLimitFunc, up to N tasks of a key run at once instead (a permit of a core semaphore
// replaces the lock; everything below holds for it, except re-entry).
//
// For each task it finds the key (WithKey) and takes the lock on it, in the namespace "asynq"
// (WithNamespace; the lock is "@asynq/"+key), for a TTL that follows the task's deadline
// (WithTTL). The handler runs with the lock's context: it carries the lock
// (core.FromContext gives its fencing token) and is cancelled if the lock is lost. The lock is
// released when the handler returns, also when it panics, and at the latest at the task's deadline
// (core.WithMaxHold of the time left until it when the acquisition starts; a task that waited for
// its key, WithWait or a last attempt, holds it at most that wait longer): asynq gives up on a task
// at its deadline and may run it again, so a handler that hangs past it, ignoring its context, must
// not keep the key. Such a task fails with an error matching core.ErrMaxHold.
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
// It returns an error matching core.ErrInvalid ("lockkit: asynqlock: what is wrong") if c is nil
// or an option is invalid.
func Middleware(c *core.Client, opts ...Option) (asynq.MiddlewareFunc, error) {
	if c == nil {
		return nil, invalid("Middleware needs a *core.Client")
	}
	o := &options{
		KeyOptions: adapter.KeyOptions[task]{Options: adapter.New("asynqlock", defaultMaxTTL, defaultNamespace)},
		minTTL:     defaultMinTTL,
	}
	byType := ByType()
	o.Key = func(in task) (string, error) { return byType(in.ctx, in.t) }
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	m := &middleware{c: c, o: o}
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			return m.process(ctx, t, next)
		})
	}, nil
}

func (o *options) validate() error {
	switch {
	case o.minTTL < core.MinTTL || o.TTL > core.MaxTTL || o.minTTL > o.TTL:
		return invalid("WithTTL(%v, %v) must satisfy %v <= floor <= cap <= %v", o.minTTL, o.TTL, core.MinTTL, core.MaxTTL)
	case o.Has("WithLimitFunc") && o.limitFn == nil:
		return invalid("WithLimitFunc(nil)")
	case o.Has("WithLimitFunc") && o.Has("WithLimit"):
		return invalid("WithLimit and WithLimitFunc cannot be combined: give one")
	}
	return o.KeyOptions.Validate("Middleware")
}

func invalid(format string, args ...any) error { return adapter.Invalid("asynqlock", format, args...) }

type middleware struct {
	c *core.Client
	o *options
}

func (m *middleware) process(ctx context.Context, t *asynq.Task, next asynq.Handler) (err error) {
	key, err := m.o.Key(task{ctx, t})
	if err != nil {
		return fmt.Errorf("lockkit: asynqlock: task key: %w", err)
	}
	if key == "" {
		return next.ProcessTask(ctx, t)
	}
	limit := m.o.Limit
	if m.o.limitFn != nil {
		if limit = m.o.limitFn(ctx, t); limit < 1 || limit > core.MaxPermits {
			return invalid("WithLimitFunc gave the task the limit %d, outside [1, %d]", limit, core.MaxPermits)
		}
	}
	l, ttl, err := m.acquire(ctx, key, limit)
	if err != nil {
		return err
	}
	lctx := l.Context()
	defer func() {
		// A context that ended before we released means the lock was lost (or the client closed).
		lost := adapter.Lost(lctx)
		rerr := adapter.Release(ctx, l, ttl)
		switch {
		case lost != nil:
			err = errors.Join(lost, err)
		case errors.Is(rerr, core.ErrLost), errors.Is(rerr, core.ErrMaxHold):
			err = errors.Join(rerr, err)
		case errors.Is(rerr, core.ErrNotHeld): // the release found the lock in other hands
			err = errors.Join(&core.LostError{Name: l.Name(), Reason: "not_owner"}, rerr, err)
		case rerr != nil:
			// Redis unreachable: the lock expires within its TTL; the task itself is done and is
			// not failed for it.
			m.o.Warn(ctx, "release failed", rerr, slog.String("task", t.Type()))
		}
	}()
	return next.ProcessTask(lctx, t)
}

// acquire takes the lock of key (or, with a limit, one of its permits), trying once or waiting as
// configured.
func (m *middleware) acquire(ctx context.Context, key string, limit int) (*core.Lock, time.Duration, error) {
	ttl := m.o.TTL
	opts := make([]core.AcquireOption, 0, 3)
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		ttl = min(left, ttl)
		// The hold ends at the deadline even if the handler ignores its context (asynq gives up on
		// it then and may retry the task elsewhere): a hung handler must not keep the key.
		opts = append(opts, core.WithMaxHold(max(left, time.Millisecond)))
	}
	ttl = max(ttl, m.o.minTTL)
	if limit > 0 {
		opts = append(opts, core.Permits(limit)) // a permit is never re-entered: no owner token
	} else if tok, ok := ownerToken(ctx); ok {
		opts = append(opts, core.WithToken(tok))
	}
	var (
		l   *core.Lock
		err error
	)
	if lastAttempt(ctx) {
		l, err = m.c.Acquire(ctx, key, ttl, append(opts, core.InNamespace(m.o.Namespace))...) // until the task's deadline
	} else {
		l, err = adapter.Acquire(ctx, m.c, m.o.Namespace, key, ttl, m.o.Wait, opts...)
	}
	if err == nil {
		return l, ttl, nil
	}
	var na *core.NotAcquiredError
	if errors.As(err, &na) {
		return nil, 0, &KeyBusyError{Key: key, RetryAfter: na.RetryAfter, err: err}
	}
	if errors.Is(err, core.ErrMisconfigured) {
		// Redis refuses the lock for a configuration reason: every retry would fail the same way
		// (see the package doc).
		return nil, 0, fmt.Errorf("lockkit: asynqlock: task lock: %w: %w", err, asynq.SkipRetry)
	}
	return nil, 0, fmt.Errorf("lockkit: asynqlock: task lock: %w", err)
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
