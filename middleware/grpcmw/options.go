package grpcmw

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockkit/lockkit/core"
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

// ScopeFunc returns the scope of an idempotency key, so that equal keys sent by different tenants or
// to different methods never share a record. The default scope is the full method name.
type ScopeFunc func(ctx context.Context, fullMethod string) (string, error)

// IdempotencyKeyHeader is the metadata key that carries the idempotency key of a unary call.
const IdempotencyKeyHeader = "idempotency-key"

const (
	defaultTTL       = 10 * time.Second
	defaultRetention = 24 * time.Hour
	maxIdemKeyLen    = 255
)

// Option configures UnaryServerInterceptor and StreamServerInterceptor.
type Option func(*options)

type options struct {
	ttl       time.Duration
	wait      time.Duration
	code      codes.Code
	keyFunc   KeyFunc
	mdKey     string
	methods   []string
	idem      bool
	retention time.Duration
	scope     ScopeFunc
	stored    []codes.Code
	waitOpts  []core.AcquireOption // built once: WithWait(wait) when waiting
}

func newOptions(opts []Option) *options {
	o := &options{ttl: defaultTTL, code: codes.Aborted, retention: defaultRetention}
	for _, f := range opts {
		f(o)
	}
	// The bounds are core's: checking them here turns a misconfiguration into a panic at start-up
	// instead of a failure of every call.
	if o.ttl < 10*time.Millisecond || o.ttl > 24*time.Hour {
		panic(fmt.Sprintf("lockkit: grpcmw: TTL %v outside [10ms, 24h]", o.ttl))
	}
	if o.code == codes.OK {
		panic("lockkit: grpcmw: the contended code must not be codes.OK")
	}
	if o.retention < time.Millisecond {
		o.retention = defaultRetention
	}
	if o.wait > 0 {
		o.waitOpts = []core.AcquireOption{core.WithWait(o.wait)}
	}
	return o
}

// WithTTL sets the TTL of the locks (default 10s, allowed 10ms to 24h). The core watchdog renews a
// held lock while the handler runs, so the TTL only bounds how long a crashed replica blocks the key.
func WithTTL(d time.Duration) Option {
	return func(o *options) { o.ttl = d }
}

// WithWait makes a call wait up to d for a lock held by another call before failing (default 0:
// fail at once). The call's deadline bounds the wait too.
func WithWait(d time.Duration) Option {
	return func(o *options) { o.wait = max(d, 0) }
}

// WithContendedCode sets the status code of a call that did not get its lock because another call
// holds it (default codes.Aborted). The status carries an errdetails.RetryInfo.
func WithContendedCode(c codes.Code) Option {
	return func(o *options) { o.code = c }
}

// WithKeyFunc sets a function that returns the business key of a call. It is asked when the request
// does not implement Keyer or returns an empty key.
func WithKeyFunc(f KeyFunc) Option {
	return func(o *options) { o.keyFunc = f }
}

// WithMetadataKey reads the business key from the named request metadata (header), as the last
// source after Keyer and WithKeyFunc. A call that sends the header twice fails with
// codes.InvalidArgument.
func WithMetadataKey(name string) Option {
	return func(o *options) { o.mdKey = strings.ToLower(name) }
}

// WithMethods restricts the interceptor to the given methods: full method names such as
// "/bank.Accounts/Withdraw", or a service prefix ending in a slash such as "/bank.Accounts/". Other
// calls pass through. For richer rules, wrap the interceptor in go-grpc-middleware's selector.
func WithMethods(fullMethods ...string) Option {
	return func(o *options) { o.methods = append(o.methods, fullMethods...) }
}

// WithIdempotency turns on idempotent replay for unary calls that send the IdempotencyKeyHeader
// metadata: the first call runs the handler under a lock on the key, and its response is stored
// for retention (default 24h, when retention is 0) together with a SHA-256 fingerprint of the
// request. A duplicate gets the stored response, or waits for it as WithWait allows, or fails with
// the contended code while the first call runs. A duplicate with a different request fails with
// codes.InvalidArgument. Errors are not stored (see WithStoredErrors), so a failed call can be
// retried with the same key. Requests and responses must be protobuf messages; the response type
// must be in protoregistry.GlobalTypes (generated code registers itself).
func WithIdempotency(retention time.Duration) Option {
	return func(o *options) {
		o.idem = true
		o.retention = retention
	}
}

// WithIdempotencyScope sets the scope of idempotency keys (default: the full method name). Return
// the caller's identity (a tenant, an account) to keep their keys apart.
func WithIdempotencyScope(f ScopeFunc) Option {
	return func(o *options) { o.scope = f }
}

// WithStoredErrors makes WithIdempotency store and replay errors with the given status codes too,
// for failures that a retry would only repeat (such as codes.InvalidArgument or
// codes.FailedPrecondition).
func WithStoredErrors(c ...codes.Code) Option {
	return func(o *options) { o.stored = append(o.stored, c...) }
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
