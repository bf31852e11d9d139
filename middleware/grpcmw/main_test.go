package grpcmw_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) { locktest.VerifyTestMain(m) }

// The test service is registered by hand (no protoc): lockkit.test.Accounts with
//
//	Keyed(StringValue) returns (any message)  - the request implements grpcmw.Keyer (key = value)
//	Plain(StringValue) returns (any message)  - the request does not
//	Watch(StringValue) returns (stream StringValue)
const svcName = "lockkit.test.Accounts"

const (
	keyedMethod = "/" + svcName + "/Keyed"
	plainMethod = "/" + svcName + "/Plain"
	watchMethod = "/" + svcName + "/Watch"
)

// keyed is a request message whose lock key is its value.
type keyed struct{ *wrapperspb.StringValue }

func (k keyed) LockKey() string { return k.GetValue() }

// service holds the handlers; one service is shared by every replica of a test, so that counters
// see the calls of all servers.
type service struct {
	unary func(ctx context.Context, method string, in *wrapperspb.StringValue) (proto.Message, error)
	watch func(in *wrapperspb.StringValue, ss grpc.ServerStream) error
}

func unaryMethod(name string, newReq func() proto.Message, value func(any) *wrapperspb.StringValue) grpc.MethodDesc {
	full := "/" + svcName + "/" + name
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			req := newReq()
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				return srv.(*service).unary(ctx, full, value(req))
			}
			if ic == nil {
				return h(ctx, req)
			}
			return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, h)
		},
	}
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: svcName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		unaryMethod("Keyed",
			func() proto.Message { return keyed{&wrapperspb.StringValue{}} },
			func(r any) *wrapperspb.StringValue { return r.(keyed).StringValue }),
		unaryMethod("Plain",
			func() proto.Message { return &wrapperspb.StringValue{} },
			func(r any) *wrapperspb.StringValue { return r.(*wrapperspb.StringValue) }),
	},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Watch",
		ServerStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error {
			in := &wrapperspb.StringValue{}
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			return srv.(*service).watch(in, ss)
		},
	}},
}

// replica is one gRPC server with its own core.Client, and a client connection to it.
type replica struct {
	locks *core.Client
	conn  *grpc.ClientConn
}

// env is a test setup: one Redis shared by n replicas.
type env struct {
	srv      *redistest.Server
	rdb      *redis.Client
	replicas []*replica
}

// setup starts Redis and n replicas serving svc with the interceptors configured by opts.
func setup(t *testing.T, svc *service, n int, opts ...grpcmw.Option) *env {
	t.Helper()
	srv := redistest.Start(t)
	e := &env{srv: srv, rdb: srv.Client(t)}
	for range n {
		e.replicas = append(e.replicas, startReplica(t, srv, svc, nil, opts...))
	}
	return e
}

// startReplica starts a gRPC server on 127.0.0.1:0 with a fresh core.Client; all are stopped when
// the test ends. The stream interceptor gets the options that apply to it.
func startReplica(t *testing.T, srv *redistest.Server, svc *service, coreOpts []core.Option, opts ...grpcmw.Option) *replica {
	t.Helper()
	locks := locktest.NewClient(t, srv.Client(t), coreOpts...)
	serverOpts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(recovery, grpcmw.UnaryServerInterceptor(locks, opts...))}
	if si := streamInterceptor(locks, opts); si != nil {
		serverOpts = append(serverOpts, grpc.ChainStreamInterceptor(si))
	}
	gs := grpc.NewServer(serverOpts...)
	gs.RegisterService(&serviceDesc, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &replica{locks: locks, conn: conn}
}

// streamInterceptor returns the stream interceptor built with opts, or nil when opts hold an
// option of unary calls only (idempotent replay), which StreamServerInterceptor refuses: the tests
// that pass one call no stream.
func streamInterceptor(locks *core.Client, opts []grpcmw.Option) (si grpc.StreamServerInterceptor) {
	defer func() {
		if p := recover(); p != nil {
			err, _ := p.(error)
			if !errors.Is(err, core.ErrInvalid) || !strings.HasSuffix(err.Error(), " does not apply to StreamServerInterceptor") {
				panic(p)
			}
			si = nil
		}
	}()
	return grpcmw.StreamServerInterceptor(locks, opts...)
}

// recovery turns a handler panic into codes.Internal, as go-grpc-middleware's recovery does.
func recovery(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Errorf(codes.Internal, "panic: %v", r)
		}
	}()
	return handler(ctx, req)
}

// call invokes a unary method with value and returns the response value.
func (r *replica) call(ctx context.Context, method, value string, opts ...grpc.CallOption) (string, error) {
	out := &wrapperspb.StringValue{}
	err := r.conn.Invoke(ctx, method, wrapperspb.String(value), out, opts...)
	return out.GetValue(), err
}

// watch opens the Watch stream with value and returns the values received until it ends.
func (r *replica) watch(ctx context.Context, value string) ([]string, error) {
	cs, err := r.conn.NewStream(ctx, &serviceDesc.Streams[0], watchMethod)
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(wrapperspb.String(value)); err != nil {
		return nil, err
	}
	if err := cs.CloseSend(); err != nil {
		return nil, err
	}
	var got []string
	for {
		m := &wrapperspb.StringValue{}
		if err := cs.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			return got, err
		}
		got = append(got, m.GetValue())
	}
}

// wantCode fails the test unless err is a status with code.
func wantCode(t *testing.T, err error, code codes.Code) *status.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Fatalf("err = %v, want code %v", err, code)
	}
	return st
}

// retryDelay returns the RetryInfo delay of st, failing the test if there is none.
func retryDelay(t *testing.T, st *status.Status) time.Duration {
	t.Helper()
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	t.Fatalf("status %v has no RetryInfo (details %v)", st, st.Details())
	return 0
}

// subscribers returns the number of connections subscribed to the release channel of the lock name
// (in grpcmw's namespace),
// i.e. clients with a waiter on it.
func subscribers(t *testing.T, rdb *redis.Client, name string) int64 {
	ch := "lockkit:{@grpc/" + name + "}:released"
	m, err := rdb.PubSubNumSub(context.Background(), ch).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m[ch]
}

// holdLock takes the business-key lock name (in grpcmw's namespace) from a separate core.Client,
// for the length of the test.
func holdLock(t *testing.T, e *env, name string, ttl time.Duration) *core.Lock {
	t.Helper()
	c := locktest.NewClient(t, e.srv.Client(t))
	l, err := c.Acquire(context.Background(), name, ttl, core.InNamespace("grpc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}
