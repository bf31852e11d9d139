package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// sceneGRPC: two replicas of an accounts service (real gRPC servers on loopback ports) with
// grpcmw's interceptor, which locks "account/ID" (in its namespace: "@grpc/account/ID") around
// each Debit call. Six concurrent calls for one account, spread over both replicas, run one at a
// time; a call for another account does not wait behind them.
func sceneGRPC(ctx context.Context, s *scene) error {
	const (
		work  = 120 * time.Millisecond // how long a Debit call works under the lock
		calls = 6
	)
	led := &ledger{work: work}
	var conns [2]*grpc.ClientConn
	for i := range 2 {
		locks, _, err := s.newLocks()
		if err != nil {
			return err
		}
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
			grpcSpan(s.tracing.tracer),
			grpcmw.UnaryServerInterceptor(locks, grpcmw.WithWait(10*time.Second)), // wait for the account's lock
		))
		srv.RegisterService(&accountsDesc, &accounts{replica: i + 1, ledger: led})
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		served := make(chan struct{})
		go func() { _ = srv.Serve(lis); close(served) }()
		s.onClose(func() { srv.GracefulStop(); <-served })
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		s.onClose(func() { _ = conn.Close() })
		conns[i] = conn
	}
	s.logf("%d concurrent Debit calls for account A (alternating between 2 replicas) + 1 for account B; each works %v", calls, work)

	t0 := time.Now()
	results := make([]error, calls+1)
	var wg sync.WaitGroup
	for i := range calls + 1 {
		account, replica := "A", i%2
		if i == calls {
			account = "B"
		}
		wg.Go(func() {
			req, err := structpb.NewStruct(map[string]any{"account": account, "call": i + 1})
			if err == nil {
				err = conns[replica].Invoke(ctx, debitMethod, req, &structpb.Struct{})
			}
			results[i] = err
		})
	}
	wg.Wait()
	var errs []error
	for i, err := range results {
		if err != nil {
			errs = append(errs, fmt.Errorf("call %d: %w", i+1, err))
		}
	}
	if len(errs) == 0 {
		s.check(true, "all %d calls succeeded", len(results))
	} else {
		s.check(false, "all %d calls succeeded: %v", len(results), errors.Join(errs...))
	}

	runs := led.snapshot()
	var a, b []interval
	for _, r := range runs {
		if r.key == core.Namespaced("grpc", "account/B") { // grpcmw locks in its namespace
			b = append(b, r)
		} else {
			a = append(a, r)
		}
	}
	s.timeline(t0, append(slices.Clone(a), b...))
	s.check(len(a) == calls && overlaps(a) == 0, "the %d calls for account A never overlapped (%d overlaps), across both replicas", len(a), overlaps(a))
	s.check(fencesIncrease(a), "their fencing tokens increase in the order they ran")
	s.check(len(b) == 1 && len(a) == calls && b[0].end.Before(a[len(a)-1].start),
		"the call for account B did not queue behind account A's calls (it ended before A's last call started)")
	return nil
}

// ledger records when each Debit call ran under its lock.
type ledger struct {
	work time.Duration
	mu   sync.Mutex
	runs []interval
}

func (l *ledger) snapshot() []interval {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := slices.Clone(l.runs)
	slices.SortFunc(r, func(a, b interval) int { return a.start.Compare(b.start) })
	return r
}

// accounts is one replica of the service.
type accounts struct {
	replica int
	ledger  *ledger
}

// debitRequest is {"account": string, "call": number}; grpcmw locks the key its LockKey returns.
type debitRequest struct{ *structpb.Struct }

// LockKey implements grpcmw.Keyer.
func (r debitRequest) LockKey() string { return "account/" + r.GetFields()["account"].GetStringValue() }

func (a *accounts) debit(ctx context.Context, req debitRequest) (*structpb.Struct, error) {
	l, ok := core.FromContext(ctx) // ctx is the lock's context
	if !ok {
		return nil, errors.New("no lock in the handler's context")
	}
	start := time.Now()
	if !sleep(ctx, a.ledger.work) {
		return nil, context.Cause(ctx)
	}
	f := req.GetFields()
	iv := interval{
		label: fmt.Sprintf("%s#%d on replica %d", f["account"].GetStringValue(), int(f["call"].GetNumberValue()), a.replica),
		key:   l.Name(),
		start: start, end: time.Now(), fence: l.Fence(),
	}
	a.ledger.mu.Lock()
	a.ledger.runs = append(a.ledger.runs, iv)
	a.ledger.mu.Unlock()
	return structpb.NewStruct(map[string]any{"replica": a.replica})
}

const debitMethod = "/lockkit.demo.Accounts/Debit"

// accountsDesc registers the service by hand, without generated code: its messages are
// google.protobuf.Struct (the approach of examples/grpcserver).
var accountsDesc = grpc.ServiceDesc{
	ServiceName: "lockkit.demo.Accounts",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Debit",
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			req := debitRequest{&structpb.Struct{}}
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				return srv.(*accounts).debit(ctx, req.(debitRequest))
			}
			if ic == nil {
				return h(ctx, req)
			}
			return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: debitMethod}, h)
		},
	}},
	Metadata: "lockkit/demo/accounts.proto",
}

// grpcSpan starts a server span per call, so that the lock spans nest under it.
func grpcSpan(tracer trace.Tracer) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, span := tracer.Start(ctx, info.FullMethod, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		return h(ctx, req)
	}
}
