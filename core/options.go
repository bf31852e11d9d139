package core

import (
	"log/slog"
	"strings"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
)

// Option configures a Client.
type Option func(*options)

type options struct {
	store.Config // WithLabel, WithPipelining, WithReplicaAck, WithNodeTimeout (Drift: set by store)
	prefix       string
	hooks        []Hook
	renewRatio   float64
	backoffMin   time.Duration
	backoffMax   time.Duration
	waiterTTL    time.Duration
	batchSize    int
	driftFactor  float64
	maxHold      time.Duration // WithDefaultMaxHold; 0: no limit
	logger       *slog.Logger  // WithLogger; nil: slog.Default()
}

// buildOptions applies opts over the defaults and checks the result.
func buildOptions(opts []Option) (options, error) {
	o := options{
		Config:      store.Config{Pipeline: 8}, // WithPipelining's default threshold
		prefix:      "lockkit:",
		renewRatio:  1.0 / 3,
		backoffMin:  20 * time.Millisecond,
		backoffMax:  1 * time.Second,
		waiterTTL:   5 * time.Second,
		batchSize:   1000,
		driftFactor: 0.01,
	}
	for i, f := range opts {
		if f == nil {
			return o, invalid("Option %d is nil", i)
		}
		f(&o)
	}

	switch {
	case strings.ContainsAny(o.prefix, "{}"):
		return o, invalid("core.WithPrefix: prefix %q must not contain '{' or '}' (they mark the hash tag)", o.prefix)
	case !(o.renewRatio >= 0.05 && o.renewRatio <= 0.8):
		return o, invalid("core.WithRenewRatio: r must be 0.05..0.8, got %v", o.renewRatio)
	case o.backoffMin <= 0 || o.backoffMax < o.backoffMin:
		return o, invalid("core.WithRetryBackoff: need 0 < min <= max, got min %v, max %v", o.backoffMin, o.backoffMax)
	case o.waiterTTL < 100*time.Millisecond:
		return o, invalid("core.WithFairWaiterTimeout: d must be at least 100ms, got %v", o.waiterTTL)
	case !(o.driftFactor >= 0.01 && o.driftFactor <= 0.5):
		return o, invalid("core.WithDriftFactor: f must be 0.01..0.5, got %v", o.driftFactor)
	case o.NodeTimeout < 0:
		return o, invalid("core.WithNodeTimeout: d must not be negative, got %v", o.NodeTimeout)
	case o.Replicas < 0:
		return o, invalid("core.WithReplicaAck: n must not be negative, got %d", o.Replicas)
	case o.Replicas > 0 && o.ReplicaWait <= 0:
		return o, invalid("core.WithReplicaAck: timeout must be positive, got %v", o.ReplicaWait)
	case len(o.Label) > 128:
		return o, invalid("core.WithLabel: label must be at most 128 bytes, got %d", len(o.Label))
	case o.maxHold < 0:
		return o, invalid("core.WithDefaultMaxHold: d must not be negative, got %v", o.maxHold)
	case o.Pipeline < 0:
		return o, invalid("core.WithPipelining: minInFlight must not be negative, got %d", o.Pipeline)
	}
	return o, nil
}

// WithLabel sets a label for the Client's holds (at most 128 bytes, e.g. "billing-worker"),
// recorded with each acquisition next to the holder's host name and process id, and reported by
// Inspect and the lockkit command. Default: none.
func WithLabel(label string) Option { return func(o *options) { o.Label = label } }

// WithLogger sets where the Client reports what no caller is told: a release that failed after
// its caller left (Do whose function failed, a hold ended by WithMaxHold, a background give-back),
// the first failed renewal of a held lock, a lost lock, and a Redis master that may evict lock
// keys (one warning per master, from the first acquisition on). The default is slog.Default() (read
// when a message is logged); slog.New(slog.DiscardHandler) silences the Client.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithPrefix sets the prefix of every Redis key and channel (default "lockkit:"). It must not contain
// '{' or '}'.
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithHook adds an instrumentation hook. Hooks run in the order they were added; each receives the
// context returned by the one before.
func WithHook(h Hook) Option { return func(o *options) { o.hooks = append(o.hooks, h) } }

// WithRenewRatio sets when the watchdog renews a held lock, as a fraction of its TTL since the last
// successful acquire or renewal (default 1/3, allowed 0.05 to 0.8).
func WithRenewRatio(r float64) Option { return func(o *options) { o.renewRatio = r } }

// WithRetryBackoff sets the fallback wait of a waiting Acquire: it retries after a jittered delay that
// starts at min and doubles up to max (defaults 20ms and 1s), never longer than the holder's remaining
// TTL. Waiters are normally woken at once by the holder's release; the backoff only covers expiries
// and missed release messages.
func WithRetryBackoff(min, max time.Duration) Option {
	return func(o *options) { o.backoffMin, o.backoffMax = min, max }
}

// WithFairWaiterTimeout sets how long a fair waiter keeps its place in the Redis-side queue without
// refreshing it (default 5s). A waiter that dies is skipped after this long.
func WithFairWaiterTimeout(d time.Duration) Option { return func(o *options) { o.waiterTTL = d } }

// WithDriftFactor sets the safety margin a lock keeps before its expiry, as a fraction of its TTL
// (plus 2ms): the lock's context is cancelled when renewals have failed until send time + TTL −
// margin. The default, 0.01, is Redlock's clock drift allowance. The watchdog adds twice the
// lateness it measures in its own timer (an overloaded host, long GC pauses, a throttled
// container), up to a quarter of the TTL (docs/guarantees.md, "Late timers"); a larger factor
// also covers stalls it had no sign of. Allowed: 0.01 to 0.5.
func WithDriftFactor(f float64) Option { return func(o *options) { o.driftFactor = f } }

// WithNodeTimeout bounds each node's answer to a Redlock request. A slow or dead node costs at most
// this much. The default follows the nodes' measured round trips, at least the lock's TTL/20 (and
// 10ms) and at most TTL/3, for every call on the lock (see docs/topologies.md). Ignored by New.
func WithNodeTimeout(d time.Duration) Option { return func(o *options) { o.NodeTimeout = d } }

// WithReplicaAck makes every acquisition (plain, Fair or WithGuard) and every Lock.ReleaseSet wait,
// on the same connection, until n replicas of the master acknowledged it (Redis WAIT), at most
// timeout. If fewer do, an acquisition is released and fails with ErrUnavailable; a ReleaseSet
// stays done (value written, lock released) and returns an error matching ErrUnavailable saying
// that the write may not survive a failover. It narrows the failover window in which a replica
// promoted before it received the lock (or a guard's value) lets a second holder in (or the work
// run again); it costs the replication delay on each of these calls. Works with plain, Sentinel and
// Cluster clients, and on each Redlock node.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(o *options) { o.Replicas, o.ReplicaWait = n, timeout }
}

// WithDefaultMaxHold sets the maximum hold of every acquisition that does not set its own with
// WithMaxHold (default 0: no limit). See WithMaxHold.
func WithDefaultMaxHold(d time.Duration) Option { return func(o *options) { o.maxHold = d } }

// AcquireOption configures one Acquire, TryAcquire or Do call. An option given an argument out of
// its range (WithWait(0), Permits(0), WithOwner(""), ...) makes the call that uses it fail with an
// error matching ErrInvalid that names the option, before anything is sent to Redis.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	maxWait time.Duration
	maxHold time.Duration // WithMaxHold, else the Client's default; 0: no limit
	fair    bool
	owner   string // WithOwner: re-enter only
	token   string // WithToken: take or re-enter under this token
	guard   string
	ns      string // "@" + namespace (InNamespace), or empty
	permits int    // Permits: take a permit of a semaphore of this many; 0: the lock
	rw      uint8  // Read, Write: a side of the read-write lock (rwRead, rwWrite); 0: the lock
	err     error  // the first out-of-range argument an option was given (refusing)
}

// refusing returns an option that makes the call fail with err: an argument out of the option's
// range, checked once, when the option is made. The first refusal wins.
func refusing(err error) AcquireOption {
	return func(o *acquireOptions) {
		if o.err == nil {
			o.err = err
		}
	}
}

// applyAcquireOptions applies opts over the Client's default maximum hold and returns the call's
// options, or the error of an argument out of range (see refusing) or of a nil option.
func applyAcquireOptions(opts []AcquireOption, maxHold time.Duration) (acquireOptions, error) {
	if len(opts) == 0 {
		return acquireOptions{maxHold: maxHold}, nil
	}
	p := &acquireOptions{maxHold: maxHold} // (options escape: spare the no-option call this allocation)
	for i, f := range opts {
		if f == nil {
			return acquireOptions{}, invalid("AcquireOption %d is nil", i)
		}
		f(p)
	}
	return *p, p.err
}

// WithWait bounds how long Acquire waits (default: until the context ends). When it passes, Acquire
// returns a *NotAcquiredError. d must be positive: not to wait at all, use TryAcquire (WithWait(0)
// is refused with ErrInvalid rather than read as "no limit").
func WithWait(d time.Duration) AcquireOption {
	if d <= 0 {
		return refusing(invalid("core.WithWait: d must be positive, got %v (TryAcquire does not wait)", d))
	}
	return func(o *acquireOptions) { o.maxWait = d }
}

// WithOwner re-enters the lock held by the given owner token, usually the Token of a lock held
// elsewhere (another goroutine without the lock's context, or another process): the call adds a
// hold to that owner's acquisition, keeps its fence and reports Holds() > 1. It never takes the lock
// afresh: if the owner does not hold the lock (it was released, expired, force-released or lost),
// the call fails at once, without waiting, with an error matching ErrNotHeld and ErrLost. The token
// must be 1 to 128 bytes, without a NUL byte, and not start with a control byte. To take a lock
// afresh under a token of your own, see WithToken.
func WithOwner(token string) AcquireOption {
	if p := store.TokenProblem(token); p != "" {
		return refusing(invalid("core.WithOwner: %s", p))
	}
	return func(o *acquireOptions) { o.owner = token }
}

// WithToken acquires under the given owner token (1 to 128 bytes, no NUL byte, not starting with a
// control byte: those mark the holds of a name's other kinds, see docs/keys.md) instead of a new
// random one: if that token holds the lock already, the call re-enters it as WithOwner does;
// otherwise it takes the lock afresh (a new fence, Holds() 1), waiting as any acquisition.
// Choose tokens that are unique per unit of work, e.g. derived from a task ID, so that a unit of
// work delivered twice re-enters its own lock instead of waiting for itself (asynqlock does this).
// A hold of an earlier acquisition under the same token (one that was force-released or expired
// meanwhile) is not renewed by the new acquisition: it hears at its next renewal that the lock
// is not its own.
func WithToken(token string) AcquireOption {
	if p := store.TokenProblem(token); p != "" {
		return refusing(invalid("core.WithToken: %s", p))
	}
	return func(o *acquireOptions) { o.token = token }
}

// Fair makes a waiting Acquire take its turn in a FIFO queue kept in Redis, so that waiters in every
// process are served in arrival order. All acquirers of a name should use it for the order to hold.
func Fair() AcquireOption { return func(o *acquireOptions) { o.fair = true } }

// WithGuard makes the acquisition conditional on a guard key, checked in the same round trip: if the
// key exists (a stored result, a completion marker), nothing is taken and the call returns a
// *GuardedError with the key's value; a waiting Acquire returns it as soon as the key appears. The
// key must live in the lock's cluster slot: its hash tag (the first "{…}" that is not empty, as
// Redis reads it) must be the lock's, "{name}" (e.g. "lockkit:idem:{name}"); otherwise the call
// fails with ErrInvalid before anything is sent. Pair it with Lock.ReleaseSet, which writes it
// atomically with the release. Not combinable with Fair. An empty key is refused with ErrInvalid.
func WithGuard(key string) AcquireOption {
	if key == "" {
		return refusing(invalid("core.WithGuard: key is empty"))
	}
	return func(o *acquireOptions) { o.guard = key }
}

// WithMaxHold ends the hold d after it was acquired, even while renewals succeed (d = 0: no limit;
// it overrides WithDefaultMaxHold): the lock's context is cancelled with a *MaxHoldError cause
// (matching ErrMaxHold, not ErrLost), renewals stop and the hold is released, which wakes the next
// waiter. It bounds how long a hung holder can keep everyone else out, as ShedLock's
// lockAtMostFor does. The deadline is kept by the watchdog's scheduler: it costs no timer or
// goroutine per lock. If the release cannot be sent, the lock still expires within its TTL.
//
// The limit is per hold. A re-entry through the lock's context is nested work: it ends no later
// than the hold it re-entered (at the earlier of the two deadlines), and both holds are released
// together, so nesting cannot stretch the limit. A re-entry through WithOwner is an independent
// hold with its own limit (or none), counted from its own acquisition: the lock stays held until
// the last hold ends. Afterwards Release and Extend return an error matching ErrNotHeld and
// ErrMaxHold. A negative d is refused with ErrInvalid.
func WithMaxHold(d time.Duration) AcquireOption {
	if d < 0 {
		return refusing(invalid("core.WithMaxHold: d must not be negative, got %v", d))
	}
	return func(o *acquireOptions) { o.maxHold = d }
}

// MinTTL and MaxTTL bound the TTL of a lock (Acquire, TryAcquire, Do, Lock.Extend).
const (
	MinTTL = 10 * time.Millisecond
	MaxTTL = 24 * time.Hour
)

func validTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return invalid("ttl must be MinTTL..MaxTTL (%v..%v), got %v", MinTTL, MaxTTL, ttl)
	}
	return nil
}

// WithPipelining sets when the Client's lock traffic is coalesced into pipelines: while at least
// minInFlight of its commands are in flight at once (the new one included), through go-redis's
// automatic pipelining (its AsyncAutoPipeline, EXPERIMENTAL upstream). It is on by default, from
// 8 commands in flight (go-redis's own threshold for holding back a flush); 0 turns it off, 1
// pipelines every command. Below the threshold a command goes straight out: a lone caller pays
// nothing for it. Under concurrency, many callers' acquisitions and releases share one round trip
// and one read and write on each side, which raises throughput and lowers Redis's CPU per lock.
// Above a threshold of 2 or more, the Client also sends a command straight out while half of
// those in flight are in the pipeliner, for as long as it measures that this gets its commands
// done faster (on a host with idle cores; docs/topologies.md, "Pipelining").
//
// Each call's context still bounds it; a call abandoned while its command was queued or in flight
// is handled as a lost reply (an acquisition is given back once the command has run). Renewals
// keep their own pipelines, the release subscription and WithReplicaAck's WAIT their own
// connections. The pipeliner is the go-redis client's own (built on first use for a plain,
// Sentinel failover or Cluster client, routed per node and slot; one per Redlock node), shared
// with anyone else who asks that client for it (the first caller's options win), bounded to
// 8192 queued commands (beyond that, commands go straight out) and stopped by closing the go-redis
// client, not the lockkit Client. Over any other client (a Ring, or an AutoPipeliner handed to
// New, whose wrapped client core cannot see: a Cluster would then be driven as a single node)
// the option has no effect.
func WithPipelining(minInFlight int) Option { return func(o *options) { o.Pipeline = minInFlight } }

// drift is the safety margin kept before a lock's expiry: TTL × the drift factor + 2ms.
func (o *options) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*o.driftFactor) + 2*time.Millisecond
}

// The sides of a read-write lock (acquireOptions.rw).
const (
	rwRead  uint8 = 1
	rwWrite uint8 = 2
)

// store is what the store needs of o (core/internal/store).
func (o *options) store() *store.Config {
	c := o.Config
	c.Drift = o.drift
	return &c
}
