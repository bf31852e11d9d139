package grpcmw

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"slices"

	"github.com/lockkit/lockkit/internal/exactlyonce"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// ReplayedHeader is the response metadata set to "true" on a call answered from a stored response.
const ReplayedHeader = "idempotent-replayed"

// idempotencyKey returns the call's idempotency key, or "" when it sends none.
func idempotencyKey(ctx context.Context) (string, error) {
	v := metadata.ValueFromIncomingContext(ctx, IdempotencyKeyHeader)
	switch {
	case len(v) == 0:
		return "", nil
	case len(v) > 1:
		return "", status.Errorf(codes.InvalidArgument, "lockkit: grpcmw: metadata %q sent %d times", IdempotencyKeyHeader, len(v))
	case v[0] == "" || len(v[0]) > maxIdemKeyLen:
		return "", status.Errorf(codes.InvalidArgument, "lockkit: grpcmw: metadata %q must be 1 to %d bytes, got %d",
			IdempotencyKeyHeader, maxIdemKeyLen, len(v[0]))
	}
	return v[0], nil
}

// scope returns the key of ikey in the call's scope: the full method and the caller, which is the
// WithIdempotencyScope principal or else the credentials the call carries (every "authorization"
// metadata value, the SHA-256 of the peer's TLS certificate).
func (ic *interceptor) scope(ctx context.Context, fullMethod, ikey string) (exactlyonce.Key, error) {
	if ic.o.scope != nil {
		p, err := ic.o.scope(ctx, fullMethod)
		if err != nil {
			return exactlyonce.Key{}, callerErr("idempotency scope", err)
		}
		return ic.store.Key(fullMethod, "principal", p, "", ikey), nil
	}
	var auth []byte
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		auth = exactlyonce.AppendField(auth, v)
	}
	var cert string
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			sum := sha256.Sum256(ti.State.PeerCertificates[0].Raw)
			cert = string(sum[:])
		}
	}
	return ic.store.Key(fullMethod, "credentials", string(auth), cert, ikey), nil
}

// idempotent runs a unary call that carries the idempotency key ikey: it replays the stored
// response, reports a call in progress or a key reused, or runs the handler (under the business
// keys' locks too, if any) and stores its outcome as the lock is released.
func (ic *interceptor) idempotent(ctx context.Context, ikey string, keys []string, req any, fullMethod string, handler grpc.UnaryHandler) (any, error) {
	msg, ok := req.(proto.Message)
	if !ok {
		return nil, status.Errorf(codes.Internal, "lockkit: grpcmw: idempotency needs a protobuf request, got %T", req)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		ic.o.warn(ctx, "request fingerprint", err, fullMethod)
		return nil, status.Error(codes.Internal, "lockkit: grpcmw: cannot fingerprint the request")
	}
	fp := sha256.Sum256(b)
	k, err := ic.scope(ctx, fullMethod, ikey)
	if err != nil {
		return nil, err
	}
	run, rec, err := ic.store.Begin(ctx, &exactlyonce.Request{
		Key:         k,
		Fingerprint: func() ([32]byte, error) { return fp, nil },
		Log:         []slog.Attr{slog.String("method", fullMethod)},
	})
	switch {
	case rec != nil:
		return replay(ctx, rec)
	case errors.Is(err, exactlyonce.ErrMismatch):
		return nil, status.Error(codes.InvalidArgument, "lockkit: grpcmw: idempotency key reused with a different request")
	case errors.Is(err, exactlyonce.ErrUnreadable):
		return nil, status.Error(codes.Internal, "lockkit: grpcmw: cannot replay the stored response")
	case err != nil:
		return nil, ic.status(ctx, err, fullMethod)
	}
	return ic.runIdempotent(ctx, run, fp, keys, req, fullMethod, handler)
}

// runIdempotent runs the handler under the idempotency lock (and the business keys' locks, if
// any), then releases it, storing the outcome if it is to be replayed.
func (ic *interceptor) runIdempotent(ctx context.Context, run *exactlyonce.Run, fp [32]byte, keys []string, req any, method string, handler grpc.UnaryHandler) (resp any, err error) {
	done := false
	defer func() {
		if !done { // the handler failed, panicked, or its outcome is not stored
			_ = run.Release(ctx, "")
		}
	}()
	lctx := run.Context()
	if len(keys) > 0 {
		h, kerr := ic.acquire(lctx, keys, method)
		if kerr != nil {
			if lerr := ic.lostStatus(ctx, run.Lost(), method); lerr != nil { // lost while waiting
				return nil, lerr
			}
			return nil, ic.status(ctx, kerr, method)
		}
		resp, err = ic.runUnary(lctx, h, req, method, handler)
	} else {
		resp, err = handler(lctx, req)
	}
	if lerr := ic.lostStatus(ctx, run.Lost(), method); lerr != nil {
		return nil, lerr
	}
	rec, why := ic.o.record(fp, resp, err)
	if rec == nil {
		if why != "" {
			done = true
			_ = run.Release(ctx, why)
		}
		return resp, err
	}
	done = true
	// The handler ran entirely under the lock. If the record cannot be stored now (the lock was lost
	// in the meantime, or Redis is down), the work is done all the same: answer with its outcome.
	// The store logs why.
	_ = run.Store(ctx, rec, 0)
	return resp, err
}

// Kinds of the records of grpcmw: the payload is a marshalled anypb.Any holding the response
// (kindResponse) or a marshalled google.rpc.Status (kindStatus).
const (
	kindResponse = 'r'
	kindStatus   = 's'
)

// record encodes the outcome of a call for replay. It returns nil when the outcome is not to be
// stored, with a reason to log if that is worth a warning.
func (o *options) record(fp [32]byte, resp any, err error) (rec []byte, why string) {
	kind := byte(kindResponse)
	var payload []byte
	if err != nil {
		st, isStatus := status.FromError(err)
		if !isStatus || !slices.Contains(o.stored, st.Code()) {
			return nil, ""
		}
		kind = kindStatus
		if payload, err = proto.Marshal(st.Proto()); err != nil {
			return nil, "status cannot be marshalled"
		}
	} else {
		m, isProto := resp.(proto.Message)
		if !isProto {
			return nil, "response is not a protobuf message"
		}
		a, aerr := anypb.New(m)
		if aerr != nil {
			return nil, "response cannot be marshalled"
		}
		if payload, err = proto.Marshal(a); err != nil {
			return nil, "response cannot be marshalled"
		}
	}
	if len(payload) > o.maxBody {
		return nil, "response larger than the body limit"
	}
	return exactlyonce.Encode(kind, fp, payload), ""
}

// decodeRecord parses a stored record into the outcome it replays: a response, or a status.
func decodeRecord(rec *exactlyonce.Record) (resp proto.Message, st *status.Status, err error) {
	payload := []byte(rec.Payload)
	switch rec.Kind {
	case kindResponse:
		var a anypb.Any
		if err := proto.Unmarshal(payload, &a); err != nil {
			return nil, nil, err
		}
		m, err := a.UnmarshalNew()
		if err != nil {
			return nil, nil, err
		}
		return m, nil, nil
	case kindStatus:
		var s spb.Status
		if err := proto.Unmarshal(payload, &s); err != nil {
			return nil, nil, err
		}
		if s.Code == int32(codes.OK) {
			return nil, nil, errors.New("stored status is OK")
		}
		return nil, status.FromProto(&s), nil
	}
	return nil, nil, errors.New("unknown idempotency record kind")
}

// replay answers a duplicate call from the stored record; the store checked its fingerprint.
func replay(ctx context.Context, rec *exactlyonce.Record) (any, error) {
	resp, st, err := decodeRecord(rec)
	if err != nil {
		return nil, status.Error(codes.Internal, "lockkit: grpcmw: cannot replay the stored response")
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(ReplayedHeader, "true"))
	if st != nil {
		return nil, st.Err()
	}
	return resp, nil
}
