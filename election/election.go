package election

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

//go:embed proclaim.lua
var proclaimLua string

// DefaultTTL is the TTL of the leadership lock unless WithTTL sets another.
const DefaultTTL = 10 * time.Second

// pollEvery bounds how long an observer goes without reading the lock: the safety net for a
// missed message while its subscription reconnects.
const pollEvery = time.Second

// Option configures an Election.
type Option func(*Election)

// WithTTL sets the TTL of the leadership lock (default DefaultTTL): a leader whose process dies
// or stops is replaced at most this long after it was last renewed, and the watchdog renews it at
// a third of it.
func WithTTL(d time.Duration) Option { return func(e *Election) { e.ttl = d } }

// WithMaxTerm ends each term d after its leader took the lock, even while its renewals succeed
// (default 0: terms are not limited). The term's context is then cancelled with a
// *core.MaxHoldError cause (matching core.ErrMaxHold, not core.ErrLost) and leadership is released,
// which wakes the next campaigner: it bounds how long one leader keeps leading. Without it a term
// lasts until it is resigned or lost, whatever core.WithDefaultMaxHold the Client has: leadership
// is meant to last.
func WithMaxTerm(d time.Duration) Option { return func(e *Election) { e.maxTerm = d } }

// namespace holds every election's lock: no other lock name can reach it (see core.InNamespace).
const namespace = "election"

// Election is a leader election over one name. It is safe for concurrent use; several processes
// (or goroutines) campaign on the same name and at most one leads at a time.
type Election struct {
	locks   *core.Client
	rdb     redis.UniversalClient
	name    string // the lock name: the election's name in namespace "election" (core.Namespaced)
	raw     string // the election's name
	key     string // the lock's Redis key
	ttl     time.Duration
	maxTerm time.Duration // WithMaxTerm; 0: none
	pubCmd  string
	cluster bool
}

// New returns the election called name. locks takes the leadership lock; rdb must be the go-redis
// client locks was made with (core.New), through which observers read and subscribe. Nothing is
// sent to Redis.
func New(locks *core.Client, rdb redis.UniversalClient, name string, opts ...Option) (*Election, error) {
	if locks == nil || rdb == nil {
		return nil, fmt.Errorf("%w: election needs a core.Client and its redis client", core.ErrInvalid)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: election name is empty", core.ErrInvalid)
	}
	e := &Election{locks: locks, rdb: rdb, name: core.Namespaced(namespace, name), raw: name, ttl: DefaultTTL, pubCmd: "PUBLISH"}
	for _, o := range opts {
		o(e)
	}
	if e.ttl < core.MinTTL || e.ttl > core.MaxTTL {
		return nil, fmt.Errorf("%w: election TTL %v outside [%v, %v]", core.ErrInvalid, e.ttl, core.MinTTL, core.MaxTTL)
	}
	if e.maxTerm < 0 {
		return nil, fmt.Errorf("%w: election maximum term %v is negative", core.ErrInvalid, e.maxTerm)
	}
	if _, ok := rdb.(*redis.ClusterClient); ok {
		e.cluster, e.pubCmd = true, "SPUBLISH"
	}
	e.key = locks.Prefix() + "{" + e.name + "}"
	return e, nil
}

// proclaim runs proclaim.lua: it records value as the leader's, if l still holds the lock, and
// announces it. It goes whole, as EVAL (1 KB, once per term): EVALSHA names a script by its SHA-1,
// which the client does not compute (it runs in FIPS 140-only mode, GODEBUG=fips140=only), and
// SCRIPT LOAD, which would give it, is not among the commands an election needs
// (docs/security.md).
func (e *Election) proclaim(ctx context.Context, l *core.Lock, value string) (int, error) {
	cmd := redis.NewCmd(ctx, "eval", proclaimLua, 1, l.Key(), l.Token(), value, l.Fence(), e.pubCmd)
	cmd.SetFirstKeyPos(3)
	_ = e.rdb.Process(ctx, cmd)
	return cmd.Int()
}

// Term is one leadership: from a successful Campaign until Resign, or until it is lost.
type Term struct {
	l     *core.Lock
	value string
}

// Campaign waits until the caller leads (until ctx ends), then records value as the leader's
// value and announces it to observers. Followers are woken by the leader's release, or try when
// its lock expires. The returned Term's context is cancelled when leadership ends. A term is not
// limited in time unless WithMaxTerm says so (a Client's core.WithDefaultMaxHold does not apply).
//
// Errors are core's: ErrNotAcquired joined with ctx.Err() when ctx ended the wait, ErrUnavailable,
// ErrClosed; ErrLost if leadership was lost before value could be recorded.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	// WithMaxHold(0) unless WithMaxTerm: the Client's WithDefaultMaxHold does not cut terms.
	l, err := e.locks.Acquire(ctx, e.raw, e.ttl, core.InNamespace(namespace), core.WithMaxHold(e.maxTerm))
	if err != nil {
		return nil, err
	}
	if l.Holds() > 1 {
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: campaigning with the context of this election's own term", core.ErrInvalid)
	}
	ok, err := e.proclaim(ctx, l, value)
	if err != nil || ok != 1 {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.ttl)
		rerr := l.Release(rctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w: election %q: announcing the leader: %w", core.ErrUnavailable, e.name, err)
		}
		return nil, errors.Join(core.ErrLost, rerr)
	}
	return &Term{l: l, value: value}, nil
}

// Context is cancelled when the term ends; context.Cause says why: core.ErrReleased after Resign;
// a *core.LostError when leadership was lost (renewals failed until the lock's validity deadline,
// or it was taken away), before anyone else could lead; a *core.MaxHoldError (matching
// core.ErrMaxHold) when the election's WithMaxTerm limit ended it; core.ErrClosed when the Client
// was closed. It derives from the context passed to Campaign, so it also ends with that one (and
// its cause). Do the leader's work under it.
func (t *Term) Context() context.Context { return t.l.Context() }

// Fence is the term's fencing token: larger than that of every earlier term of the election.
func (t *Term) Fence() int64 { return t.l.Fence() }

// Value is the value the leader campaigned with.
func (t *Term) Value() string { return t.value }

// Resign gives leadership up: the term's context is cancelled, the value removed, and the next
// campaigner woken. Errors as core.Lock.Release.
func (t *Term) Resign(ctx context.Context) error { return t.l.Release(ctx) }

// Leader is a leader as observers see it. The zero Leader means that nobody leads.
type Leader struct {
	// Value is the value the leader campaigned with.
	Value string
	// Fence is its term's fence.
	Fence int64
}

// Leader returns the current leader (the zero Leader when nobody leads). A leader that has taken
// the lock but not yet recorded its value is reported as no leader.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	s, err := e.read(ctx)
	return s.leader, err
}

// read reads the lock: its fence, whether it is held, the proclaimed leader and its TTL.
func (e *Election) read(ctx context.Context) (lockState, error) {
	p := e.rdb.Pipeline()
	get := p.Get(ctx, e.key)
	pt := p.PTTL(ctx, e.key)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return lockState{}, fmt.Errorf("%w: election %q: %w", core.ErrUnavailable, e.name, err)
	}
	// The lock's value (docs/keys.md): held, TOKEN FENCE HOLDS W BASE PREV ACQUIRED LABEL separated
	// by NUL bytes (a byte 2 before BASE), then the leader's value once proclaimed (see
	// proclaim.lua); free, a byte 2, BASE, NUL, FENCE.
	fields := strings.SplitN(get.Val(), "\x00", 8)
	if len(fields) < 2 {
		return lockState{}, nil
	}
	f, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || f <= 0 {
		return lockState{}, nil // not a lock's value: as if there were none
	}
	s := lockState{fence: f, held: fields[0] != "" && fields[0][0] != 2, pttl: pt.Val()}
	if s.held && len(fields) == 8 {
		s.leader = Leader{Value: fields[7], Fence: f}
	}
	return s, nil
}

// parseAnnounce reads a leader message: "FENCE VALUE".
func parseAnnounce(payload string) (Leader, bool) {
	fs, v, ok := strings.Cut(payload, " ")
	f, err := strconv.ParseInt(fs, 10, 64)
	if !ok || err != nil {
		return Leader{}, false
	}
	return Leader{Value: v, Fence: f}, true
}
