package grpcmw

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"

	"github.com/lockkit/lockkit/core"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
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

// idemNames returns the lock name and the record key of an idempotency key in a scope. The record
// key carries the lock's hash tag, as core.WithGuard requires.
func idemNames(prefix, scope, ikey string) (name, recordKey string) {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(ikey))
	name = "grpc-idem/" + hex.EncodeToString(h.Sum(nil))
	return name, prefix + "idem:{" + name + "}"
}

// idempotent runs a unary call that carries the idempotency key ikey: it replays the stored
// response, reports a call in progress, or runs the handler (under the business key's lock too, if
// key is set) and stores its response as the lock is released.
func (o *options) idempotent(ctx context.Context, locks *core.Client, ikey, key string, req any, fullMethod string, handler grpc.UnaryHandler) (any, error) {
	msg, ok := req.(proto.Message)
	if !ok {
		return nil, status.Errorf(codes.Internal, "lockkit: grpcmw: idempotency needs a protobuf request, got %T", req)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "lockkit: grpcmw: fingerprint: %v", err)
	}
	fp := sha256.Sum256(b)
	scope := fullMethod
	if o.scope != nil {
		if scope, err = o.scope(ctx, fullMethod); err != nil {
			return nil, callerErr("idempotency scope", err)
		}
	}
	name, recordKey := idemNames(locks.Prefix(), scope, ikey)
	opts := append([]core.AcquireOption{core.WithGuard(recordKey)}, o.waitOpts...)
	l, err := o.acquire(ctx, locks, name, opts...)
	if err != nil {
		if g, ok := errors.AsType[*core.GuardedError](err); ok {
			return replay(ctx, []byte(g.Value), fp)
		}
		return nil, o.status(ctx, err, name, &ikey)
	}
	return o.runIdempotent(ctx, locks, l, recordKey, fp, key, req, handler)
}

// runIdempotent runs the handler under the idempotency lock l (and the business key's lock, if
// any), then releases l, storing the outcome if it is to be replayed.
func (o *options) runIdempotent(ctx context.Context, locks *core.Client, l *core.Lock, recordKey string, fp [32]byte, key string, req any, handler grpc.UnaryHandler) (resp any, err error) {
	done := false
	defer func() {
		if !done { // the handler failed, panicked, or its outcome is not stored
			release(ctx, l)
		}
	}()
	lctx := l.Context()
	if key != "" {
		kl, kerr := o.acquire(lctx, locks, key, o.waitOpts...)
		if kerr != nil {
			if lerr := lostErr(lctx); lerr != nil { // lost while waiting for the business key
				return nil, lerr
			}
			return nil, o.status(ctx, kerr, key, nil)
		}
		resp, err = runUnary(lctx, kl, req, handler)
	} else {
		resp, err = handler(lctx, req)
	}
	if lerr := lostErr(lctx); lerr != nil {
		return nil, lerr
	}
	rec, ok := o.record(fp, resp, err)
	if !ok {
		return resp, err
	}
	done = true
	// The handler ran entirely under the lock. If the record cannot be stored now (the lock was lost
	// in the meantime, or Redis is down), the work is done all the same: answer with its outcome.
	_ = l.ReleaseSet(context.WithoutCancel(ctx), recordKey, rec, o.retention)
	return resp, err
}

// Record layout: magic, SHA-256 fingerprint of the request, kind, then a marshalled anypb.Any
// holding the response (kindResponse) or a marshalled google.rpc.Status (kindStatus).
const (
	recordMagic  = "lkg1"
	kindResponse = 'r'
	kindStatus   = 's'
	recordHeader = len(recordMagic) + sha256.Size + 1
)

// record encodes the outcome of a call for replay; ok is false when it is not to be stored.
func (o *options) record(fp [32]byte, resp any, err error) (rec []byte, ok bool) {
	kind := byte(kindResponse)
	var payload []byte
	if err != nil {
		st, isStatus := status.FromError(err)
		if !isStatus || !slices.Contains(o.stored, st.Code()) {
			return nil, false
		}
		kind = kindStatus
		if payload, err = proto.Marshal(st.Proto()); err != nil {
			return nil, false
		}
	} else {
		m, isProto := resp.(proto.Message)
		if !isProto {
			return nil, false
		}
		a, aerr := anypb.New(m)
		if aerr != nil {
			return nil, false
		}
		if payload, err = proto.Marshal(a); err != nil {
			return nil, false
		}
	}
	rec = make([]byte, 0, recordHeader+len(payload))
	rec = append(rec, recordMagic...)
	rec = append(rec, fp[:]...)
	rec = append(rec, kind)
	return append(rec, payload...), true
}

// decodeRecord parses a stored record into the request fingerprint and the outcome it replays: a
// response, or a status.
func decodeRecord(b []byte) (fp [32]byte, resp proto.Message, st *status.Status, err error) {
	if len(b) < recordHeader || !bytes.HasPrefix(b, []byte(recordMagic)) {
		return fp, nil, nil, errors.New("not an idempotency record")
	}
	copy(fp[:], b[len(recordMagic):])
	payload := b[recordHeader:]
	switch b[recordHeader-1] {
	case kindResponse:
		var a anypb.Any
		if err := proto.Unmarshal(payload, &a); err != nil {
			return fp, nil, nil, err
		}
		m, err := a.UnmarshalNew()
		if err != nil {
			return fp, nil, nil, err
		}
		return fp, m, nil, nil
	case kindStatus:
		var s spb.Status
		if err := proto.Unmarshal(payload, &s); err != nil {
			return fp, nil, nil, err
		}
		if s.Code == int32(codes.OK) {
			return fp, nil, nil, errors.New("stored status is OK")
		}
		return fp, nil, status.FromProto(&s), nil
	}
	return fp, nil, nil, errors.New("unknown idempotency record kind")
}

// replay answers a duplicate call from the stored record b.
func replay(ctx context.Context, b []byte, fp [32]byte) (any, error) {
	stored, resp, st, err := decodeRecord(b)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "lockkit: grpcmw: cannot replay the stored response: %v", err)
	}
	if stored != fp {
		return nil, status.Error(codes.InvalidArgument,
			"lockkit: grpcmw: idempotency key reused with a different request")
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(ReplayedHeader, "true"))
	if st != nil {
		return nil, st.Err()
	}
	return resp, nil
}
