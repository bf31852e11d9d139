// Package exactlyonce runs a unit of work at most once per key across every process that shares a
// Redis, stores its outcome and replays it: the one layer under httpmw's Idempotency, grpcmw's
// idempotent replay and cronlock's tick markers. The adapters keep only their transport mapping
// (how a request is fingerprinted, how an outcome is encoded and answered).
//
// A unit of work has a Key: a lock in the Store's namespace and a record key under the lock's hash
// tag. Begin takes the lock guarded by the record (core.WithGuard: one round trip) and tells the
// cases apart:
//
//   - the lock is taken: the caller runs the work under Run.Context (cancelled if the lock is
//     lost), then Run.Store writes the outcome with the release (core.Lock.ReleaseSet, one round
//     trip, only while the lock is still ours) or Run.Release gives the key back without storing;
//   - a record exists: it is decoded and its fingerprint compared with the request's (asked only
//     now): the same request replays the Record, another one gets ErrMismatch;
//   - another holder runs the work: an *InFlightError (ErrInFlight) with the holder's remaining TTL;
//   - Redis is unavailable: the error, or with FailOpen a Run without a lock that stores nothing.
//
// Policies, the same for every adapter:
//
//   - Release and store use a context detached from the caller's and bounded by the lock's TTL: an
//     ended request still gives its key back, and never waits longer than the lock can live.
//   - A lock lost while the work ran stores nothing (Run.Store and Run.Release return the cause,
//     matching core.ErrLost or core.ErrClosed): another holder may have run the work too.
//   - A failed store is logged and returned, never fatal: the work was done and its outcome is
//     answered; the key stays locked until the lock's TTL, then the work may run again.
//   - Everything the caller is not told (not stored, release failed, unreadable record, fail-open)
//     goes to the Config.Logger at Warn, with the request's attributes.
package exactlyonce

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/adapter"
)

// Config configures a Store.
type Config struct {
	// Component names the adapter in errors and log messages ("httpmw").
	Component string
	// Namespace is the core namespace of the locks (core.InNamespace).
	Namespace string
	// RecordPrefix starts every record key; default the core.Client's prefix and "idem:".
	RecordPrefix string
	// TTL is the lock's TTL (core.MinTTL to core.MaxTTL); it also bounds release and store.
	TTL time.Duration
	// Wait is how long Begin waits for another holder (0: not at all).
	Wait time.Duration
	// Retention is how long a stored outcome is kept, unless Run.Store says otherwise; at least 1ms.
	Retention time.Duration
	// FailOpen runs the work without a lock, storing nothing, when Redis is unavailable.
	FailOpen bool
	// Logger receives what callers are not told; nil means slog.Default(), read when a message is
	// logged (the adapters' rule: nothing is dropped silently unless a discarding logger is given).
	Logger *slog.Logger
}

// Store runs work at most once per Key. It is safe for concurrent use.
type Store struct {
	locks *core.Client
	cfg   Config
}

// New returns a Store over locks, or an error matching core.ErrInvalid for a bad Config.
func New(locks *core.Client, cfg Config) (*Store, error) {
	pkg := cfg.Component
	if locks == nil {
		return nil, adapter.Invalid(pkg, "nil *core.Client")
	}
	if cfg.RecordPrefix == "" {
		cfg.RecordPrefix = locks.Prefix() + "idem:"
	}
	if err := validate(&cfg); err != nil {
		return nil, err
	}
	return &Store{locks: locks, cfg: cfg}, nil
}

func validate(cfg *Config) error {
	pkg := cfg.Component
	if err := adapter.CheckNamespace(pkg, cfg.Namespace); err != nil {
		return err
	}
	if err := adapter.CheckTTL(pkg, "WithTTL", cfg.TTL); err != nil {
		return err
	}
	if err := adapter.CheckWait(pkg, cfg.Wait); err != nil {
		return err
	}
	for _, c := range cfg.RecordPrefix {
		if c == '{' || c == '}' {
			return adapter.Invalid(pkg, "record prefix %q must not contain '{' or '}'", cfg.RecordPrefix)
		}
	}
	if cfg.Retention < time.Millisecond {
		return adapter.Invalid(pkg, "WithRetention(%v) is below 1ms", cfg.Retention)
	}
	return nil
}

// Errors of Begin, besides core's (core.ErrUnavailable, core.ErrClosed, core.ErrInvalid, the
// context's).
var (
	// ErrInFlight means another holder is running the work: the error is an *InFlightError.
	ErrInFlight = errors.New("lockkit: exactlyonce: work in flight")
	// ErrMismatch means a record exists for the key, produced by a different request.
	ErrMismatch = errors.New("lockkit: exactlyonce: key reused with a different request")
)

// InFlightError is returned by Begin while another holder runs the work. It matches ErrInFlight,
// and unwraps to the lock error (a *core.NotAcquiredError, joined with the context's error if the
// context ended the wait).
type InFlightError struct {
	// RetryAfter is the holder's remaining lock TTL; zero when unknown.
	RetryAfter time.Duration
	err        error
}

// Error describes the condition without the key.
func (e *InFlightError) Error() string {
	return fmt.Sprintf("lockkit: exactlyonce: work in flight; retry after %v", e.RetryAfter)
}

// Is reports whether target is ErrInFlight.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// Unwrap returns the lock error.
func (e *InFlightError) Unwrap() error { return e.err }

// Request is one attempt at a unit of work.
type Request struct {
	// Key names the work (Store.Key, Store.KeyNamed).
	Key Key
	// Fingerprint identifies the request; it is asked only when a record exists, to tell a replay
	// from a reuse of the key. Its error is returned by Begin as is.
	Fingerprint func() ([sha256.Size]byte, error)
	// Log holds the attributes logged with every warning about this request.
	Log []slog.Attr
	// Acquire holds more options for the lock's acquisition (core.WithMaxHold).
	Acquire []core.AcquireOption
}

// Begin takes the work of req, or finds its outcome: see the package documentation. Exactly one
// of the results is set: a Run (hold the work: call Store or Release), a Record (replay it) or an
// error.
func (s *Store) Begin(ctx context.Context, req *Request) (*Run, *Record, error) {
	l, err := adapter.Acquire(ctx, s.locks, s.cfg.Namespace, req.Key.name, s.cfg.TTL, s.cfg.Wait,
		append(req.Acquire, core.WithGuard(req.Key.record))...)
	if err == nil {
		return &Run{s: s, req: req, l: l, ctx: l.Context()}, nil, nil
	}
	var g *core.GuardedError
	var na *core.NotAcquiredError
	switch {
	case errors.As(err, &g):
		rec, err := Decode(g.Value)
		if err != nil {
			s.warn(ctx, req, "stored response unreadable", nil)
			return nil, nil, err
		}
		if req.Fingerprint != nil {
			fp, err := req.Fingerprint()
			if err != nil {
				return nil, nil, err
			}
			if fp != rec.Fingerprint {
				return nil, nil, ErrMismatch
			}
		}
		return nil, &rec, nil
	case errors.As(err, &na):
		return nil, nil, &InFlightError{RetryAfter: na.RetryAfter, err: err}
	case errors.Is(err, core.ErrUnavailable), errors.Is(err, core.ErrClosed):
		s.warn(ctx, req, "lock unavailable", err)
		if s.cfg.FailOpen {
			return &Run{s: s, req: req, ctx: ctx}, nil, nil
		}
	}
	return nil, nil, err
}

// Run is work that Begin handed to the caller. Call Store or Release once, when the work is done
// (also when it panicked).
type Run struct {
	s   *Store
	req *Request
	l   *core.Lock // nil when running without a lock (FailOpen)
	ctx context.Context
}

// Context is the context to run the work with: the lock's, cancelled if the lock is lost (or the
// caller's, without a lock).
func (r *Run) Context() context.Context { return r.ctx }

// Lock returns the lock held for the work, nil when running without one (FailOpen).
func (r *Run) Lock() *core.Lock { return r.l }

// Lost returns the cause if the lock was lost (or its Client closed) while the work ran, else nil.
func (r *Run) Lost() error {
	if r.l == nil {
		return nil
	}
	return adapter.Lost(r.l.Context())
}

// Store writes rec (AppendHead or Encode) with the lock's release, to be kept for ttl (0: the
// Store's retention). Nothing is written if the lock was lost; the error then matches
// core.ErrLost or core.ErrClosed. Errors are logged too.
func (r *Run) Store(ctx context.Context, rec []byte, ttl time.Duration) error {
	if r.l == nil {
		r.s.warn(ctx, r.req, "response not stored: lock unavailable (fail-open)", nil)
		return nil
	}
	if lost := r.Lost(); lost != nil {
		r.s.warn(ctx, r.req, "response not stored: lock lost", lost)
		return lost
	}
	if ttl == 0 {
		ttl = r.s.cfg.Retention
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.s.cfg.TTL)
	defer cancel()
	err := r.l.ReleaseSet(sctx, r.req.Key.record, rec, ttl)
	switch {
	case unacked(err):
		// Stored and released, but the replicas did not acknowledge it (core.WithReplicaAck): the
		// caller gets its answer, and a failover to a replica without the record runs the work
		// again. Nobody else would hear of it.
		r.s.log(ctx, slog.LevelError, r.req, "response stored but not acknowledged by the replicas: "+
			"after a failover a retry may run the work again", err)
	case err != nil:
		r.s.warn(ctx, r.req, "response not stored", err)
	}
	return err
}

// Release gives the key back without storing an outcome, so that the work may run again; why, if
// set, is logged. Errors are logged and returned (matching core.ErrLost or core.ErrClosed when the
// lock was lost while the work ran).
func (r *Run) Release(ctx context.Context, why string) error {
	if r.l == nil {
		return nil
	}
	if why != "" {
		r.s.warn(ctx, r.req, "response not stored: "+why, nil)
	}
	if lost := r.Lost(); lost != nil {
		return lost
	}
	err := adapter.Release(ctx, r.l, r.s.cfg.TTL)
	if err != nil {
		r.s.warn(ctx, r.req, "release failed", err)
	}
	return err
}

// unacked reports whether err says that a write was done but too few replicas acknowledged it.
func unacked(err error) bool {
	var t interface{ ErrorType() string }
	return errors.As(err, &t) && t.ErrorType() == "replica_ack"
}

// warn logs what a caller is not told.
func (s *Store) warn(ctx context.Context, req *Request, msg string, err error) {
	s.log(ctx, slog.LevelWarn, req, msg, err)
}

// log logs msg about req at level.
func (s *Store) log(ctx context.Context, level slog.Level, req *Request, msg string, err error) {
	lg := s.cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	attrs := req.Log
	if err != nil {
		attrs = append(attrs[:len(attrs):len(attrs)], slog.Any("error", err))
	}
	lg.LogAttrs(context.WithoutCancel(ctx), level, "lockkit: "+s.cfg.Component+": "+msg, attrs...)
}
