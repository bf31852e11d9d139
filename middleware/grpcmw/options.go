package grpcmw

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/lockkit/lockkit/internal/adapter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Keyer is implemented by request messages that name the business key of their call (an account,
// a document, a device): ByRequest, the default key, reads it. An empty key means the call takes no
// lock.
type Keyer interface {
	LockKey() string
}

// KeyFunc returns the business key of a call: ByRequest (the default), ByMetadata, or your own
// (WithKey). req is nil for streaming calls. An empty key means the call takes no lock; an error
// fails the call, with its own status if it carries one and codes.InvalidArgument otherwise.
type KeyFunc func(ctx context.Context, fullMethod string, req any) (string, error)

// KeysFunc returns the business keys of a call that must hold several locks at once (WithKeys),
// such as both accounts of a transfer. Empty keys are left out and a key given twice counts once;
// no key means the call takes no lock. req is nil for streaming calls; an error fails the call as a
// KeyFunc's does.
type KeysFunc func(ctx context.Context, fullMethod string, req any) ([]string, error)

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

// Option configures UnaryServerInterceptor and StreamServerInterceptor. The options of idempotent
// replay (WithIdempotency, WithIdempotencyScope, WithStoredErrors, WithMaxBody) apply to unary
// calls only: given to StreamServerInterceptor, they make it panic, as every invalid option does
// (an error matching core.ErrInvalid): options are fixed at start-up, and none is ignored
// silently.
type Option func(*options)

// UnaryOption is the former type of UnaryServerInterceptor's options.
//
// Deprecated: use Option; every option is an Option now.
type UnaryOption = Option

// call is what a key function reads: the call's context, its full method and its request.
type call struct {
	ctx    context.Context
	method string
	req    any
}

type options struct {
	adapter.KeyOptions[call] // TTL, wait, logger, namespace, limit, key(s)

	code      codes.Code
	codeSet   bool                         // WithContendedCode was given
	readOnly  func(fullMethod string) bool // WithReadWrite: the key's read-write lock; nil: its lock
	keyFunc   KeyFunc                      // WithKeyFunc (deprecated)
	mdKey     string                       // WithMetadataKey (deprecated)
	methods   []string
	idem      bool
	retention time.Duration
	maxBody   int
	scope     ScopeFunc
	stored    []codes.Code
}

// unaryOnly are the options StreamServerInterceptor refuses.
var unaryOnly = []string{"WithIdempotency", "WithIdempotencyScope", "WithStoredErrors", "WithMaxBody"}

// newOptions applies opts to the defaults and checks them for ctor, panicking on an invalid
// option.
func newOptions(ctor string, opts []Option, refused ...string) *options {
	o := &options{
		KeyOptions: adapter.KeyOptions[call]{Options: adapter.New("grpcmw", defaultTTL, keyNamespace)},
		code:       codes.Aborted, retention: defaultRetention, maxBody: defaultMaxBody,
	}
	byRequest := ByRequest()
	o.Key = func(c call) (string, error) { return byRequest(c.ctx, c.method, c.req) }
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	if err := o.validate(ctor, refused); err != nil {
		panic(err)
	}
	return o
}

// invalidOption is the error (and panic value) of a bad argument to a constructor.
func invalidOption(format string, args ...any) error {
	return adapter.Invalid("grpcmw", format, args...)
}

func (o *options) validate(ctor string, refused []string) error {
	legacy := o.Has("WithKeyFunc") || o.Has("WithMetadataKey")
	switch {
	case legacy && (o.Has("WithKey") || o.Has("WithKeys")):
		return invalidOption("WithKeyFunc and WithMetadataKey (deprecated) cannot be combined with WithKey or WithKeys")
	case legacy:
		o.Key = o.legacyKey
	}
	if err := o.KeyOptions.Validate(ctor, refused...); err != nil {
		return err
	}
	switch {
	case o.Limit > 0 && o.idem:
		return invalidOption("WithLimit and WithIdempotency cannot be combined")
	case o.Has("WithReadWrite") && o.readOnly == nil:
		return invalidOption("WithReadWrite(nil)")
	case o.readOnly != nil && o.Has("WithLimit"):
		return invalidOption("WithReadWrite and WithLimit cannot be combined: a semaphore has no read side")
	case o.readOnly != nil && o.Has("WithKeys"):
		return invalidOption("WithReadWrite and WithKeys cannot be combined: a set of locks has no read side")
	case o.Limit > 0 && !o.codeSet:
		o.code = codes.ResourceExhausted
	}
	if err := o.validateArgs(); err != nil {
		return err
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

// option returns the option name, which sets what set sets.
func option(name string, set func(*options)) Option {
	return func(o *options) {
		set(o)
		o.Given(name)
	}
}

// WithTTL sets the TTL of the locks (default 10s, allowed core.MinTTL to core.MaxTTL). The core
// watchdog renews a held lock while the handler runs, so the TTL only bounds how long a crashed
// replica blocks the key.
func WithTTL(d time.Duration) Option { return func(o *options) { o.SetTTL(d) } }

// WithWait makes a call wait up to d for a lock held by another call before failing (default 0:
// fail at once with the contended code and a RetryInfo, the default of every lockkit adapter).
// The call's deadline bounds the wait too.
func WithWait(d time.Duration) Option { return func(o *options) { o.SetWait(d) } }

// WithContendedCode sets the status code of a call that did not get its lock because another call
// holds it (default codes.Aborted; codes.ResourceExhausted with WithLimit). The status carries an
// errdetails.RetryInfo. c must be a gRPC status code other than codes.OK.
func WithContendedCode(c codes.Code) Option {
	return option("WithContendedCode", func(o *options) { o.code, o.codeSet = c, true })
}

// WithLimit lets up to n calls with the same business key run at once (1 to core.MaxPermits)
// instead of one: each call takes one of the key's n permits of a core semaphore (core.Permits) in
// the interceptor's namespace; one name, one lock: the permits exclude the key's lock and its
// reads and writes while either is held (docs/guarantees.md). When all are taken (and WithWait, if
// any, passed), the call fails with codes.ResourceExhausted (WithContendedCode overrides it)
// carrying an errdetails.RetryInfo and the grpc-retry-pushback-ms trailer. The handler's context
// is the permit's: core.FromContext gives it (Fence, Limit), and it is cancelled if the permit is
// lost. Replicas should pass the same n (see core.Permits for what happens when they differ). Not
// combinable with WithIdempotency or WithKeys.
func WithLimit(n int) Option { return func(o *options) { o.SetLimit(n) } }

// WithReadWrite makes the business-key lock the key's read-write lock (core.Read, core.Write):
// calls whose full method readOnly reports true take the shared (read) side and run together with
// the other reads of the key; every other call takes the exclusive (write) side and runs alone.
// Readers and writers are served in arrival order, across replicas, so a stream of reads does not
// starve a write. One name, one lock: a write and the key's lock (an interceptor without
// WithReadWrite) are the same exclusive side, and reads exclude it too (docs/guarantees.md). The
// handler's
// context is the hold's: core.FromContext gives it (Mode, Fence: see core.Read for the rule a
// fenced resource follows). Not combinable with WithLimit or WithKeys; readOnly must not be nil.
func WithReadWrite(readOnly func(fullMethod string) bool) Option {
	return option("WithReadWrite", func(o *options) { o.readOnly = readOnly })
}

// WithNamespace sets the core namespace of the business-key locks (default "grpc": the lock of key
// K is "@grpc/K", see core.InNamespace). A key taken from a request can never leave the
// namespace; give two components the same namespace (httpmw.WithNamespace, ...) only to make them
// exclude each other on purpose. 1 to 64 of a-z, 0-9 and '-'.
func WithNamespace(ns string) Option { return func(o *options) { o.SetNamespace(ns) } }

// WithLogger sets where the interceptors log what they do not tell the caller: Redis errors behind
// a codes.Unavailable, a lost lock, a failed release, a response not stored. Remote callers get
// generic status messages; the details, which may name keys and Redis nodes, go here. Default
// (and nil): slog.Default(), read when a message is logged; slog.New(slog.DiscardHandler)
// silences them.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.SetLogger(l) } }

// WithMaxBody sets the largest response, in marshalled bytes, that WithIdempotency stores (default
// 1 MiB). A larger response is still returned, not stored (the key is released, so a retry runs
// the handler again) and logged. Unary calls only.
func WithMaxBody(n int) Option { return option("WithMaxBody", func(o *options) { o.maxBody = n }) }

// WithKey sets how the business key of a call is found (default ByRequest: the request's Keyer):
// ByRequest, ByMetadata or a KeyFunc of your own. Calls without a key pass through.
func WithKey(f KeyFunc) Option {
	return func(o *options) {
		if f == nil {
			o.SetKey(nil)
			return
		}
		o.SetKey(func(c call) (string, error) { return f(c.ctx, c.method, c.req) })
	}
}

// WithKeys makes a call take the locks of every key f gives, all or nothing (core.AcquireAll), in
// the interceptor's namespace, instead of the lock of one key: a transfer locks both accounts. A
// call runs once it holds every one of its keys; one whose keys are partly held by other calls
// holds none of them while it waits (up to WithWait), so two calls locking the same keys in
// opposite orders never deadlock; if the wait ends, it fails with the contended code and a
// RetryInfo, as a call of one key does. The handler's context is cancelled if any of the locks is
// lost (the call then fails with codes.Aborted); core.SetFromContext gives every lock. Up to 100
// distinct keys; one key is taken as WithKey takes it. Not combinable with WithKey or WithLimit.
func WithKeys(f KeysFunc) Option {
	return func(o *options) {
		if f == nil {
			o.SetKeys(nil)
			return
		}
		o.SetKeys(func(c call) ([]string, error) { return f(c.ctx, c.method, c.req) })
	}
}

// ByRequest returns the KeyFunc that asks the request message for its key: a request implementing
// Keyer gives LockKey(), any other (and a stream, which has no request when the interceptor runs)
// none. It is the default key.
func ByRequest() KeyFunc {
	return func(_ context.Context, _ string, req any) (string, error) {
		if k, ok := req.(Keyer); ok {
			return k.LockKey(), nil
		}
		return "", nil
	}
}

// ByMetadata returns a KeyFunc that reads the key from the named request metadata (header), for
// unary and streaming calls alike. A call that sends the header twice fails with
// codes.InvalidArgument. It panics with an error matching core.ErrInvalid if name is empty (no
// call could carry the key).
func ByMetadata(name string) KeyFunc {
	if name == "" {
		panic(invalidOption("ByMetadata: the metadata name is empty"))
	}
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string, _ any) (string, error) {
		switch v := metadata.ValueFromIncomingContext(ctx, name); len(v) {
		case 0:
			return "", nil
		case 1:
			return v[0], nil
		default:
			return "", status.Errorf(codes.InvalidArgument, "lockkit: grpcmw: metadata %q sent %d times", name, len(v))
		}
	}
}

// Keys returns a KeysFunc that gives the key of each of fs, for WithKeys:
// Keys(ByMetadata("x-from"), ByMetadata("x-to")). The first error is returned. It panics if one of
// fs is nil.
func Keys(fs ...KeyFunc) KeysFunc {
	in := make([]func(call) (string, error), len(fs))
	for i, f := range fs {
		if f != nil {
			in[i] = func(c call) (string, error) { return f(c.ctx, c.method, c.req) }
		}
	}
	join := adapter.Join("grpcmw", in)
	return func(ctx context.Context, fullMethod string, req any) ([]string, error) {
		return join(call{ctx, fullMethod, req})
	}
}

// WithKeyFunc sets a function that returns the business key of a call, asked when the request
// does not implement Keyer or returns an empty key, before WithMetadataKey.
//
// Deprecated: use WithKey(f). WithKey replaces the default key (ByRequest) instead of coming after
// it: a KeyFunc that should fall back on the request's Keyer asks ByRequest itself.
func WithKeyFunc(f KeyFunc) Option {
	return option("WithKeyFunc", func(o *options) { o.keyFunc = f })
}

// WithMetadataKey reads the business key from the named request metadata (header), as the last
// source after Keyer and WithKeyFunc.
//
// Deprecated: use WithKey(ByMetadata(name)).
func WithMetadataKey(name string) Option {
	return option("WithMetadataKey", func(o *options) { o.mdKey = strings.ToLower(name) })
}

// legacyKey is the key of the deprecated options: the request's Keyer, then WithKeyFunc, then
// WithMetadataKey, the first that gives one.
func (o *options) legacyKey(c call) (string, error) {
	if k, _ := ByRequest()(c.ctx, c.method, c.req); k != "" {
		return k, nil
	}
	if o.keyFunc != nil {
		k, err := o.keyFunc(c.ctx, c.method, c.req)
		if err != nil || k != "" {
			return k, err
		}
	}
	if o.mdKey != "" {
		return ByMetadata(o.mdKey)(c.ctx, c.method, c.req)
	}
	return "", nil
}

// WithMethods restricts the interceptor to the given methods: full method names such as
// "/bank.Accounts/Withdraw", or a service prefix ending in a slash such as "/bank.Accounts/". Other
// calls pass through. At least one method must be given, each starting with '/'. For richer rules,
// wrap the interceptor in go-grpc-middleware's selector.
func WithMethods(fullMethods ...string) Option {
	return option("WithMethods", func(o *options) { o.methods = append(o.methods, fullMethods...) })
}

// WithIdempotency turns on idempotent replay for unary calls that send the IdempotencyKeyHeader
// metadata: the first call runs the handler under a lock on the key, and its response is stored
// for retention (default 24h, when retention is 0; at least 1ms) together with a SHA-256
// fingerprint of the request. A duplicate gets the stored response, or waits for it as WithWait
// allows, or fails with the contended code while the first call runs. A duplicate with a
// different request fails with codes.InvalidArgument. Errors are not stored (see
// WithStoredErrors), so a failed call can be retried with the same key; nor are responses over
// WithMaxBody. Requests and responses must be protobuf messages; the response type must be in
// protoregistry.GlobalTypes (generated code registers itself). Unary calls only.
func WithIdempotency(retention time.Duration) Option {
	return option("WithIdempotency", func(o *options) {
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
// error fails the call, with its own status or codes.InvalidArgument. f must not be nil. Unary calls
// only.
func WithIdempotencyScope(f ScopeFunc) Option {
	return option("WithIdempotencyScope", func(o *options) { o.scope = f })
}

// WithStoredErrors makes WithIdempotency store and replay errors with the given status codes too,
// for definite failures that a retry would only repeat (such as codes.InvalidArgument or
// codes.FailedPrecondition). The codes that ask for a retry (Canceled, Unknown,
// DeadlineExceeded, ResourceExhausted, Aborted, Internal, Unavailable) are never stored: giving
// one here is an invalid option. Unary calls only.
func WithStoredErrors(c ...codes.Code) Option {
	return option("WithStoredErrors", func(o *options) { o.stored = append(o.stored, c...) })
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
