package grpcmw

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/core"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// UnaryServerInterceptor returns a unary interceptor that runs each call holding a lock on the
// call's business key, taken from (in order) a request implementing Keyer, WithKeyFunc or
// WithMetadataKey; calls without a key pass through. The handler runs with the lock's context: if
// the lock is lost, that context is cancelled and the call fails with codes.Aborted whatever the
// handler returned. With WithIdempotency, calls that carry an idempotency key are also run at most
// once per key, and their responses replayed.
//
// The lock is released when the handler returns (or panics). It panics if locks is nil or an
// option is out of range.
func UnaryServerInterceptor(locks *core.Client, opts ...Option) grpc.UnaryServerInterceptor {
	if locks == nil {
		panic("lockkit: grpcmw: nil *core.Client")
	}
	o := newOptions(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !o.match(info.FullMethod) {
			return handler(ctx, req)
		}
		key, err := o.key(ctx, info.FullMethod, req)
		if err != nil {
			return nil, err
		}
		if o.idem {
			ikey, err := idempotencyKey(ctx)
			if err != nil {
				return nil, err
			}
			if ikey != "" {
				return o.idempotent(ctx, locks, ikey, key, req, info.FullMethod, handler)
			}
		}
		if key == "" {
			return handler(ctx, req)
		}
		l, err := o.acquire(ctx, locks, key, o.waitOpts...)
		if err != nil {
			return nil, o.status(ctx, err, key, nil)
		}
		return runUnary(ctx, l, req, handler)
	}
}

// StreamServerInterceptor returns a stream interceptor that runs each streaming call holding a lock
// on the call's business key, taken from WithKeyFunc (with a nil request) or WithMetadataKey; calls
// without a key pass through. The handler's stream has the lock's context: if the lock is lost,
// that context is cancelled and the call fails with codes.Aborted whatever the handler returned.
//
// The lock is released when the handler returns (or panics). It panics if locks is nil or an
// option is out of range.
func StreamServerInterceptor(locks *core.Client, opts ...Option) grpc.StreamServerInterceptor {
	if locks == nil {
		panic("lockkit: grpcmw: nil *core.Client")
	}
	o := newOptions(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		if !o.match(info.FullMethod) {
			return handler(srv, ss)
		}
		ctx := ss.Context()
		key, err := o.key(ctx, info.FullMethod, nil)
		if err != nil {
			return err
		}
		if key == "" {
			return handler(srv, ss)
		}
		l, err := o.acquire(ctx, locks, key, o.waitOpts...)
		if err != nil {
			return o.status(ctx, err, key, nil)
		}
		defer release(ctx, l)
		err = handler(srv, &lockedStream{ServerStream: ss, ctx: l.Context()})
		if lerr := lostErr(l.Context()); lerr != nil {
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

// runUnary runs handler under l and releases l, also when handler panics.
func runUnary(ctx context.Context, l *core.Lock, req any, handler grpc.UnaryHandler) (any, error) {
	defer release(ctx, l)
	resp, err := handler(l.Context(), req)
	if lerr := lostErr(l.Context()); lerr != nil {
		return nil, lerr
	}
	return resp, err
}

// release gives the lock up even if the call's context has ended; go-redis's own timeouts bound it.
// An error is not reported: the lock then expires after its TTL, as it is no longer renewed.
func release(ctx context.Context, l *core.Lock) {
	_ = l.Release(context.WithoutCancel(ctx))
}

// acquire takes the named lock: one try, or a wait bounded by WithWait.
func (o *options) acquire(ctx context.Context, locks *core.Client, name string, opts ...core.AcquireOption) (*core.Lock, error) {
	if o.wait > 0 {
		return locks.Acquire(ctx, name, o.ttl, opts...)
	}
	return locks.TryAcquire(ctx, name, o.ttl, opts...)
}

// key returns the business key of a call, or "" when it has none.
func (o *options) key(ctx context.Context, fullMethod string, req any) (string, error) {
	if k, ok := req.(Keyer); ok {
		if s := k.LockKey(); s != "" {
			return s, nil
		}
	}
	if o.keyFunc != nil {
		s, err := o.keyFunc(ctx, fullMethod, req)
		if err != nil {
			return "", callerErr("key function", err)
		}
		if s != "" {
			return s, nil
		}
	}
	if o.mdKey != "" {
		switch v := metadata.ValueFromIncomingContext(ctx, o.mdKey); len(v) {
		case 0:
		case 1:
			return v[0], nil
		default:
			return "", status.Errorf(codes.InvalidArgument, "lockkit: grpcmw: metadata %q sent %d times", o.mdKey, len(v))
		}
	}
	return "", nil
}

// callerErr turns an error of a user function into a status: its own, the context's, or
// codes.InvalidArgument.
func callerErr(what string, err error) error {
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.InvalidArgument, "lockkit: grpcmw: %s: %v", what, err)
}

// status maps an acquire error to a gRPC status. what describes the contended resource for the
// message; idem is non-nil for an idempotency lock.
func (o *options) status(ctx context.Context, err error, key string, idem *string) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "lockkit: grpcmw: deadline exceeded waiting for the lock")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "lockkit: grpcmw: call cancelled waiting for the lock")
	case errors.Is(err, core.ErrNotAcquired):
		var na *core.NotAcquiredError
		var delay = o.wait // fallback when the holder's TTL is unknown
		if errors.As(err, &na) && na.RetryAfter > 0 {
			delay = na.RetryAfter
		}
		msg := fmt.Sprintf("lockkit: grpcmw: lock %q is held by another call; retry after %v", key, delay)
		if idem != nil {
			msg = fmt.Sprintf("lockkit: grpcmw: a call with idempotency key %q is in progress; retry after %v", *idem, delay)
		}
		return contended(ctx, o.code, msg, delay)
	case errors.Is(err, core.ErrInvalid):
		return status.Errorf(codes.InvalidArgument, "lockkit: grpcmw: bad lock key: %v", err)
	case errors.Is(err, core.ErrUnavailable), errors.Is(err, core.ErrClosed):
		return status.Errorf(codes.Unavailable, "lockkit: grpcmw: %v", err)
	}
	return status.Errorf(codes.Internal, "lockkit: grpcmw: %v", err)
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

// lostErr returns the status of a call whose lock was taken away while its handler ran, or nil.
func lostErr(lockCtx context.Context) error {
	cause := context.Cause(lockCtx)
	switch {
	case cause == nil:
		return nil
	case errors.Is(cause, core.ErrLost):
		return status.Errorf(codes.Aborted, "lockkit: grpcmw: lock lost while the handler ran: %v", cause)
	case errors.Is(cause, core.ErrClosed):
		return status.Error(codes.Unavailable, "lockkit: grpcmw: lock client closed while the handler ran")
	}
	return nil // the call's own context ended: the handler's result stands
}
