package grpcmw

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/lockkit/lockkit/internal/adapter"
	"google.golang.org/grpc/codes"
)

// Keyer is implemented by request messages that name the business key of their call (an account,
// a document, a device). An empty key means the call takes no lock.
type Keyer interface {
	LockKey() string
}

// KeyFunc returns the business key of a call. req is nil for streaming calls. An empty key means the
// call takes no lock; an error fails the call, with its own status if it carries one and
// codes.InvalidArgument otherwise.
type KeyFunc func(ctx context.Context, fullMethod string, req any) (string, error)

// ScopeFunc returns the caller's principal for the scope of an idempotency key (see
// WithIdempotencyScope). The full method name is always part of the scope.
type ScopeFunc func(ctx context.Context, fullMethod string) (string, error)

// IdempotencyKeyHeader is the metadata key that carries the idempotency key of a unary call.
const IdempotencyKeyHeader = "idempotency-key"

const (
	defaultTTL       = 10 * time.Second
	defaultRetention = 24 * time.Hour
	defaultMaxBody   = 1 << 20
	maxIdemKeyLen    = 255
	// keyNamespace and idemNamespace are the core namespaces of the business-key locks (unless
	// WithNamespace) and of the idempotency locks.
	keyNamespace  = "grpc"
	idemNamespace = "grpc-idem"
)

// retryCodes are the codes that tell a client to try again: their outcomes are never stored, so a
// retry runs the handler again (Stripe's rule: store only definite outcomes of calls that ran).
var retryCodes = []codes.Code{codes.Canceled, codes.Unknown, codes.DeadlineExceeded, codes.ResourceExhausted,
	codes.Aborted, codes.Internal, codes.Unavailable}

// Option configures both UnaryServerInterceptor and StreamServerInterceptor. The constructors
// panic on an invalid option (an error matching core.ErrInvalid): options are fixed at start-up.
type Option interface {
	UnaryOption
	applyStream(*options)
}

// UnaryOption configures UnaryServerInterceptor: every Option, and the options of idempotent
// replay (WithIdempotency, WithIdempotencyScope, WithStoredErrors, WithMaxBody), which streams do
// not have.
type UnaryOption interface{ applyUnary(*options) }

// bothOption and unaryOption are the options of both interceptors and of the unary one.
type (
	bothOption  func(*options)
	unaryOption func(*options)
)

func (f bothOption) applyUnary(o *options)  { f(o) }
func (f bothOption) applyStream(o *options) { f(o) }
func (f unaryOption) applyUnary(o *options) { f(o) }

type options struct {
	ttl       time.Duration
	wait      time.Duration
	code      codes.Code
	codeSet   bool                         // WithContendedCode was given
	limit     int                          // WithLimit: permits per key; 0: a lock
	readOnly  func(fullMethod string) bool // WithReadWrite: the key's read-write lock; nil: its lock
	rw        bool                         // WithReadWrite was given
	keyFunc   KeyFunc
	mdKey     string
	methods   []string
	namespace string
	idem      bool
	retention time.Duration
	maxBody   int
	scope     ScopeFunc
	stored    []codes.Code
	logger    *slog.Logger
}

func defaultOptions() *options {
	return &options{ttl: defaultTTL, code: codes.Aborted, retention: defaultRetention, maxBody: defaultMaxBody,
		namespace: keyNamespace}
}

func unaryOptions(opts []UnaryOption) *options {
	o := defaultOptions()
	for _, f := range opts {
		f.applyUnary(o)
	}
	return o.checked()
}

func streamOptions(opts []Option) *options {
	o := defaultOptions()
	for _, f := range opts {
		f.applyStream(o)
	}
	return o.checked()
}

// checked validates o, panicking on an invalid option.
func (o *options) checked() *options {
	if err := o.validate(); err != nil {
		panic(err)
	}
	return o
}

// invalidOption is the error (and panic value) of a bad argument to a constructor.
func invalidOption(format string, args ...any) error {
	return adapter.Invalid("grpcmw", format, args...)
}

func (o *options) validate() error {
	if err := adapter.CheckTTL("grpcmw", "WithTTL", o.ttl); err != nil {
		return err
	}
	if err := adapter.CheckWait("grpcmw", o.wait); err != nil {
		return err
	}
	if err := adapter.CheckNamespace("grpcmw", o.namespace); err != nil {
		return err
	}
	switch {
	case o.limit < 0 || o.limit > 100000:
		return invalidOption("WithLimit(%d): n must be 1 to 100000", o.limit)
	case o.limit > 0 && o.idem:
		return invalidOption("WithLimit and WithIdempotency cannot be combined")
	case o.rw && (o.readOnly == nil || o.limit > 0):
		return invalidOption("WithReadWrite needs a func, and cannot be combined with WithLimit")
	case o.limit > 0 && !o.codeSet:
		o.code = codes.ResourceExhausted
	}
	switch {
	case o.code == codes.OK:
		return invalidOption("WithContendedCode(codes.OK): the contended code must be an error")
	case o.retention == 0:
		o.retention = defaultRetention
	case o.retention < time.Millisecond:
		return invalidOption("WithIdempotency(%v): retention below 1ms", o.retention)
	case o.maxBody < 0:
		return invalidOption("WithMaxBody(%d) is negative", o.maxBody)
	}
	for _, c := range o.stored {
		if c == codes.OK || slices.Contains(retryCodes, c) {
			return invalidOption("WithStoredErrors(%v): OK and the codes that ask for a retry are never stored", c)
		}
	}
	return nil
}

// WithTTL sets the TTL of the locks (default 10s, allowed 10ms to 24h). The core watchdog renews a
// held lock while the handler runs, so the TTL only bounds how long a crashed replica blocks the key.
func WithTTL(d time.Duration) Option {
	return bothOption(func(o *options) { o.ttl = d })
}

// WithWait makes a call wait up to d for a lock held by another call before failing (default 0:
// fail at once). The call's deadline bounds the wait too.
func WithWait(d time.Duration) Option {
	return bothOption(func(o *options) { o.wait = d })
}

// WithContendedCode sets the status code of a call that did not get its lock because another call
// holds it (default codes.Aborted; codes.ResourceExhausted with WithLimit). The status carries an
// errdetails.RetryInfo.
func WithContendedCode(c codes.Code) Option {
	return bothOption(func(o *options) { o.code, o.codeSet = c, true })
}

// WithLimit lets up to n calls with the same business key run at once (1 to 100000) instead of
// one: each call takes one of the key's n permits of a core semaphore (core.Permits) in the
// interceptor's namespace, apart from the key's lock. When all are taken (and WithWait, if any,
// passed), the call fails with codes.ResourceExhausted (WithContendedCode overrides it) carrying
// an errdetails.RetryInfo and the grpc-retry-pushback-ms trailer. The handler's context is the
// permit's: core.FromContext gives it (Fence, Limit), and it is cancelled if the permit is lost.
// Replicas should pass the same n (see core.Permits for what happens when they differ). Not
// combinable with WithIdempotency.
func WithLimit(n int) Option {
	if n == 0 {
		n = -1 // 0 is the unset value: refuse it as out of range
	}
	return bothOption(func(o *options) { o.limit = n })
}

// WithReadWrite makes the business-key lock the key's read-write lock (core.Read, core.Write):
// calls whose full method readOnly reports true take the shared (read) side and run together with
// the other reads of the key; every other call takes the exclusive (write) side and runs alone.
// Readers and writers are served in arrival order, across replicas, so a stream of reads does not
// starve a write. The key's read-write lock is apart from its lock: every interceptor (and
// httpmw.KeyLock sharing the namespace) that locks the same keys must use it. The handler's
// context is the hold's: core.FromContext gives it (Mode, Fence: see core.Read for the rule a
// fenced resource follows). Not combinable with WithLimit; readOnly must not be nil.
func WithReadWrite(readOnly func(fullMethod string) bool) Option {
	return bothOption(func(o *options) { o.readOnly, o.rw = readOnly, true })
}

// WithNamespace sets the core namespace of the business-key locks (default "grpc": the lock of key
// K is "@grpc/K", see core.InNamespace). A key taken from a request can never leave the
// namespace; give two components the same namespace (httpmw.WithNamespace, ...) only to make them
// exclude each other on purpose. 1 to 64 of a-z, 0-9 and '-'.
func WithNamespace(ns string) Option { return bothOption(func(o *options) { o.namespace = ns }) }

// WithLogger sets a logger for what the interceptors do not tell the caller: Redis errors behind
// a codes.Unavailable, a lost lock, a failed release, a response not stored. Remote callers get
// generic status messages; the details, which may name keys and Redis nodes, go here. Default: no
// logging.
func WithLogger(l *slog.Logger) Option { return bothOption(func(o *options) { o.logger = l }) }

// WithMaxBody sets the largest response, in marshalled bytes, that WithIdempotency stores (default
// 1 MiB). A larger response is still returned, not stored (the key is released, so a retry runs
// the handler again) and logged.
func WithMaxBody(n int) UnaryOption { return unaryOption(func(o *options) { o.maxBody = n }) }

// WithKeyFunc sets a function that returns the business key of a call. It is asked when the request
// does not implement Keyer or returns an empty key.
func WithKeyFunc(f KeyFunc) Option {
	return bothOption(func(o *options) { o.keyFunc = f })
}

// WithMetadataKey reads the business key from the named request metadata (header), as the last
// source after Keyer and WithKeyFunc. A call that sends the header twice fails with
// codes.InvalidArgument.
func WithMetadataKey(name string) Option {
	return bothOption(func(o *options) { o.mdKey = strings.ToLower(name) })
}

// WithMethods restricts the interceptor to the given methods: full method names such as
// "/bank.Accounts/Withdraw", or a service prefix ending in a slash such as "/bank.Accounts/". Other
// calls pass through. For richer rules, wrap the interceptor in go-grpc-middleware's selector.
func WithMethods(fullMethods ...string) Option {
	return bothOption(func(o *options) { o.methods = append(o.methods, fullMethods...) })
}

// WithIdempotency turns on idempotent replay for unary calls that send the IdempotencyKeyHeader
// metadata: the first call runs the handler under a lock on the key, and its response is stored
// for retention (default 24h, when retention is 0; at least 1ms) together with a SHA-256
// fingerprint of the request. A duplicate gets the stored response, or waits for it as WithWait
// allows, or fails with the contended code while the first call runs. A duplicate with a
// different request fails with codes.InvalidArgument. Errors are not stored (see
// WithStoredErrors), so a failed call can be retried with the same key; nor are responses over
// WithMaxBody. Requests and responses must be protobuf messages; the response type must be in
// protoregistry.GlobalTypes (generated code registers itself).
func WithIdempotency(retention time.Duration) UnaryOption {
	return unaryOption(func(o *options) {
		o.idem = true
		o.retention = retention
	})
}

// WithIdempotencyScope scopes idempotency keys by the caller's principal instead of the
// credentials the call carries. A key is always scoped to the full method name and to the
// caller: by default every "authorization" metadata value and the peer's TLS certificate (hashed
// with the key, never stored), so that no default lets a response cross callers. The principal
// adds to the method; it never replaces it.
//
// Return a stable principal ID that your authentication resolved (a user or tenant ID), never a
// raw credential: a bearer token changes when the client refreshes it, so a retry sent after a
// refresh lands in another scope and runs the handler again, which is what the default does. An
// error fails the call, with its own status or codes.InvalidArgument.
func WithIdempotencyScope(f ScopeFunc) UnaryOption {
	return unaryOption(func(o *options) { o.scope = f })
}

// WithStoredErrors makes WithIdempotency store and replay errors with the given status codes too,
// for definite failures that a retry would only repeat (such as codes.InvalidArgument or
// codes.FailedPrecondition). The codes that ask for a retry (Canceled, Unknown,
// DeadlineExceeded, ResourceExhausted, Aborted, Internal, Unavailable) are never stored: giving
// one here is an invalid option.
func WithStoredErrors(c ...codes.Code) UnaryOption {
	return unaryOption(func(o *options) { o.stored = append(o.stored, c...) })
}

// match reports whether the interceptor applies to fullMethod.
func (o *options) match(fullMethod string) bool {
	if len(o.methods) == 0 {
		return true
	}
	for _, m := range o.methods {
		if m == fullMethod || (strings.HasSuffix(m, "/") && strings.HasPrefix(fullMethod, m)) {
			return true
		}
	}
	return false
}
