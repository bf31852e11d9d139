package grpcmw

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/adapter"
	"github.com/lockkit/lockkit/internal/exactlyonce"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// interceptor holds what both interceptors share.
type interceptor struct {
	locks *core.Client
	o     *options
	store *exactlyonce.Store // WithIdempotency
	// WithReadWrite: the acquire options of a read-only call and of any other.
	read, write []core.AcquireOption
}

func newInterceptor(locks *core.Client, o *options) *interceptor {
	ic := &interceptor{locks: locks, o: o,
		read: []core.AcquireOption{core.Read()}, write: []core.AcquireOption{core.Write()}}
	if o.idem {
		s, err := exactlyonce.New(locks, exactlyonce.Config{Component: "grpcmw", Namespace: idemNamespace,
			TTL: o.TTL, Wait: o.Wait, Retention: o.retention, Logger: o.Logger})
		if err != nil {
			panic(err)
		}
		ic.store = s
	}
	return ic
}

// UnaryServerInterceptor returns a unary interceptor that runs each call holding a lock on the
// call's business key (WithKey; by default the request's, if it implements Keyer), or the locks
// of all its keys (WithKeys), or one of the key's permits (WithLimit); calls without a key pass
// through. The handler runs with the lock's context: if the lock is lost, that context is
// cancelled and the call fails with codes.Aborted whatever the handler returned. With
// WithIdempotency, calls that carry an idempotency key are also run at most once per key, and
// their responses replayed.
//
// The lock is released when the handler returns (or panics). It panics if locks is nil or an
// option is invalid.
func UnaryServerInterceptor(locks *core.Client, opts ...Option) grpc.UnaryServerInterceptor {
	if locks == nil {
		panic(invalidOption("UnaryServerInterceptor needs a *core.Client"))
	}
	ic := newInterceptor(locks, newOptions("UnaryServerInterceptor", opts))
	o := ic.o
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !o.match(info.FullMethod) {
			return handler(ctx, req)
		}
		keys, err := o.keys(ctx, info.FullMethod, req)
		if err != nil {
			return nil, err
		}
		if ic.store != nil {
			ikey, err := idempotencyKey(ctx)
			if err != nil {
				return nil, err
			}
			if ikey != "" {
				return ic.idempotent(ctx, ikey, keys, req, info.FullMethod, handler)
			}
		}
		if len(keys) == 0 {
			return handler(ctx, req)
		}
		h, err := ic.acquire(ctx, keys, info.FullMethod)
		if err != nil {
			return nil, ic.status(ctx, err, info.FullMethod)
		}
		return ic.runUnary(ctx, h, req, info.FullMethod, handler)
	}
}

// StreamServerInterceptor returns a stream interceptor that runs each streaming call holding a lock
// on the call's business key, as UnaryServerInterceptor does. A stream has no request message when
// the interceptor runs, so its key comes from the metadata (WithKey(ByMetadata(name))) or a
// KeyFunc (with a nil request); calls without a key pass through. The handler's stream has the
// lock's context: if the lock is lost, that context is cancelled and the call fails with
// codes.Aborted whatever the handler returned.
//
// The lock is released when the handler returns (or panics). It panics if locks is nil or an
// option is invalid or applies to unary calls only (idempotent replay).
func StreamServerInterceptor(locks *core.Client, opts ...Option) grpc.StreamServerInterceptor {
	if locks == nil {
		panic(invalidOption("StreamServerInterceptor needs a *core.Client"))
	}
	ic := newInterceptor(locks, newOptions("StreamServerInterceptor", opts, unaryOnly...))
	o := ic.o
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		if !o.match(info.FullMethod) {
			return handler(srv, ss)
		}
		ctx := ss.Context()
		keys, err := o.keys(ctx, info.FullMethod, nil)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return handler(srv, ss)
		}
		h, err := ic.acquire(ctx, keys, info.FullMethod)
		if err != nil {
			return ic.status(ctx, err, info.FullMethod)
		}
		defer ic.release(ctx, h, info.FullMethod)
		err = handler(srv, &lockedStream{ServerStream: ss, ctx: h.Context()})
		if lerr := ic.lostStatus(ctx, h.Lost(), info.FullMethod); lerr != nil {
			return lerr
		}
		return err
	}
}

// lockedStream is a grpc.ServerStream whose context is a lock's context.
type lockedStream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context returns the lock's context.
func (s *lockedStream) Context() context.Context { return s.ctx }

// acquire takes what the keys of a call of method name in the interceptor's namespace: the key's
// lock (a permit with WithLimit, a side of the read-write lock with WithReadWrite), or the locks
// of all its keys (WithKeys).
func (ic *interceptor) acquire(ctx context.Context, keys []string, method string) (adapter.Hold, error) {
	var mode []core.AcquireOption
	switch {
	case ic.o.readOnly == nil:
	case ic.o.readOnly(method):
		mode = ic.read
	default:
		mode = ic.write
	}
	return ic.o.Acquire(ctx, ic.locks, keys, mode...)
}

// runUnary runs handler under h and releases h, also when handler panics.
func (ic *interceptor) runUnary(ctx context.Context, h adapter.Hold, req any, method string, handler grpc.UnaryHandler) (any, error) {
	defer ic.release(ctx, h, method)
	resp, err := handler(h.Context(), req)
	if lerr := ic.lostStatus(ctx, h.Lost(), method); lerr != nil {
		return nil, lerr
	}
	return resp, err
}

// release gives the lock up even if the call's context has ended, bounded by the lock's TTL. An
// error is logged: the lock then expires after its TTL, as it is no longer renewed.
func (ic *interceptor) release(ctx context.Context, h adapter.Hold, method string) {
	if err := h.Release(ctx, ic.o.TTL); err != nil {
		ic.o.warn(ctx, "release failed", err, method)
	}
}

// keys returns the business keys of a call, none when it takes no lock.
func (o *options) keys(ctx context.Context, fullMethod string, req any) ([]string, error) {
	keys, err := o.KeysOf(call{ctx, fullMethod, req})
	if err != nil {
		return nil, callerErr("key function", err)
	}
	return keys, nil
}

// callerErr turns an error of a user function into a status: its own, the context's, or
// codes.InvalidArgument with the function's message.
func callerErr(what string, err error) error {
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.InvalidArgument, "lockkit: grpcmw: %s: %v", what, err)
}

// status maps an acquire error to a gRPC status. Its message is generic: it never carries the key,
// a Redis error or a node's address, which go to the logger.
func (ic *interceptor) status(ctx context.Context, err error, method string) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "lockkit: grpcmw: deadline exceeded waiting for the lock")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "lockkit: grpcmw: call cancelled waiting for the lock")
	case errors.Is(err, core.ErrNotAcquired), errors.Is(err, exactlyonce.ErrInFlight):
		delay := ic.o.Wait // fallback when the holder's TTL is unknown
		var na *core.NotAcquiredError
		if errors.As(err, &na) && na.RetryAfter > 0 {
			delay = na.RetryAfter
		}
		msg := "lockkit: grpcmw: the lock is held by another call; retry after " + delay.String()
		if ic.o.Limit > 0 {
			msg = "lockkit: grpcmw: too many concurrent calls for this key; retry after " + delay.String()
		}
		if errors.Is(err, exactlyonce.ErrInFlight) {
			msg = "lockkit: grpcmw: a call with this idempotency key is in progress; retry after " + delay.String()
		}
		return contended(ctx, ic.o.code, msg, delay)
	case errors.Is(err, core.ErrInvalid):
		ic.o.warn(ctx, "lock key refused", err, method)
		return status.Error(codes.InvalidArgument, "lockkit: grpcmw: invalid lock key")
	case errors.Is(err, core.ErrUnavailable), errors.Is(err, core.ErrClosed):
		ic.o.warn(ctx, "lock unavailable", err, method)
		return status.Error(codes.Unavailable, "lockkit: grpcmw: lock service unavailable")
	case errors.Is(err, core.ErrMisconfigured): // the server's to fix: not Unavailable, which clients retry
		ic.o.warn(ctx, "lock refused: fix the Redis configuration", err, method)
		return status.Error(codes.Internal, "lockkit: grpcmw: lock service misconfigured")
	}
	ic.o.warn(ctx, "lock failed", err, method)
	return status.Error(codes.Internal, "lockkit: grpcmw: lock failed")
}

// contended returns a status with code and msg carrying RetryInfo, and sets the
// grpc-retry-pushback-ms trailer that grpc's built-in retry policy honours.
func contended(ctx context.Context, code codes.Code, msg string, delay time.Duration) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}); err == nil {
		st = d
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", strconv.FormatInt(delay.Milliseconds(), 10)))
	return st.Err()
}

// lostStatus returns the status of a call whose lock was taken away (or whose Client closed)
// while its handler ran (cause, from Hold.Lost), or nil. The cause, which names the lock, is
// logged.
func (ic *interceptor) lostStatus(ctx context.Context, cause error, method string) error {
	switch {
	case cause == nil:
		return nil
	case errors.Is(cause, core.ErrLost):
		ic.o.warn(ctx, "lock lost while the handler ran", cause, method)
		return status.Error(codes.Aborted, "lockkit: grpcmw: lock lost while the handler ran")
	default:
		ic.o.warn(ctx, "lock client closed while the handler ran", cause, method)
		return status.Error(codes.Unavailable, "lockkit: grpcmw: lock client closed while the handler ran")
	}
}

// warn logs what the caller is not told, with the call's method.
func (o *options) warn(ctx context.Context, msg string, err error, method string) {
	o.Warn(ctx, msg, err, slog.String("method", method))
}
