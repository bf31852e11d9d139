package grpcmw_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// withIdem returns a context sending an idempotency key.
func withIdem(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), grpcmw.IdempotencyKeyHeader, key)
}

// counting returns a handler that counts its runs and answers "run-N" after work().
func counting(runs *atomic.Int64, work func(ctx context.Context) error) func(context.Context, string, *wrapperspb.StringValue) (proto.Message, error) {
	return func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		n := runs.Add(1)
		if err := work(ctx); err != nil {
			return nil, err
		}
		return wrapperspb.String(fmt.Sprintf("run-%d:%s", n, in.GetValue())), nil
	}
}

func TestIdempotency_concurrentDuplicates_wait_runOnce(t *testing.T) {
	var runs atomic.Int64
	svc := &service{unary: counting(&runs, func(context.Context) error {
		time.Sleep(20 * time.Millisecond) // the work: duplicates arrive while it runs
		return nil
	})}
	e := setup(t, svc, 2, grpcmw.WithIdempotency(time.Minute), grpcmw.WithWait(10*time.Second))
	const dups = 50
	var wg sync.WaitGroup
	var replayed atomic.Int64
	outs := make(chan string, dups)
	errs := make(chan error, dups)
	for i := range dups {
		wg.Go(func() {
			var hdr metadata.MD
			out, err := e.replicas[i%2].call(withIdem("pay-1"), plainMethod, "100 EUR", grpc.Header(&hdr))
			if err != nil {
				errs <- err
				return
			}
			if len(hdr.Get(grpcmw.ReplayedHeader)) == 1 {
				replayed.Add(1)
			}
			outs <- out
		})
	}
	wg.Wait()
	close(errs)
	close(outs)
	for err := range errs {
		t.Fatal(err)
	}
	for out := range outs {
		if out != "run-1:100 EUR" {
			t.Fatalf("response %q, want the first run's", out)
		}
	}
	if runs.Load() != 1 || replayed.Load() != dups-1 {
		t.Fatalf("handler ran %d times (want 1), %d replays (want %d)", runs.Load(), replayed.Load(), dups-1)
	}
}

func TestIdempotency_concurrentDuplicates_failFast_abortInFlight(t *testing.T) {
	const dups = 50
	var runs, failed atomic.Int64
	othersDone := make(chan struct{})
	svc := &service{unary: counting(&runs, func(ctx context.Context) error {
		select { // stay in flight until every duplicate has been answered
		case <-othersDone:
			return nil
		case <-time.After(10 * time.Second):
			return status.Error(codes.Internal, "duplicates were not answered while the first call ran")
		}
	})}
	e := setup(t, svc, 2, grpcmw.WithIdempotency(time.Minute))
	var wg sync.WaitGroup
	outs := make(chan string, dups)
	errs := make(chan error, dups)
	for i := range dups {
		wg.Go(func() {
			out, err := e.replicas[i%2].call(withIdem("pay-2"), plainMethod, "7 EUR")
			if err != nil {
				errs <- err
				if failed.Add(1) == dups-1 {
					close(othersDone)
				}
				return
			}
			outs <- out
		})
	}
	wg.Wait()
	close(errs)
	close(outs)
	for err := range errs {
		st := wantCode(t, err, codes.Aborted)
		if d := retryDelay(t, st); d <= 0 || d > 10*time.Second {
			t.Fatalf("RetryInfo delay %v", d)
		}
		if !strings.Contains(st.Message(), "in progress") {
			t.Fatalf("message %q", st.Message())
		}
	}
	if len(outs) != 1 || runs.Load() != 1 {
		t.Fatalf("%d successes and %d runs, want 1 and 1", len(outs), runs.Load())
	}
	// Once the first call is done, a duplicate gets its response.
	var hdr metadata.MD
	out, err := e.replicas[1].call(withIdem("pay-2"), plainMethod, "7 EUR", grpc.Header(&hdr))
	if err != nil || out != "run-1:7 EUR" || hdr.Get(grpcmw.ReplayedHeader)[0] != "true" {
		t.Fatalf("replay: %q %v %v", out, err, hdr)
	}
}

func TestIdempotency_differentRequest_invalidArgument(t *testing.T) {
	var runs atomic.Int64
	e := setup(t, &service{unary: counting(&runs, func(context.Context) error { return nil })}, 1,
		grpcmw.WithIdempotency(time.Minute))
	r := e.replicas[0]
	if _, err := r.call(withIdem("k"), plainMethod, "A"); err != nil {
		t.Fatal(err)
	}
	_, err := r.call(withIdem("k"), plainMethod, "B")
	st := wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(st.Message(), "different request") || runs.Load() != 1 {
		t.Fatalf("message %q, runs %d", st.Message(), runs.Load())
	}
}

func TestIdempotency_errorsNotStored_unlessAsked(t *testing.T) {
	var runs atomic.Int64
	fail := func(ctx context.Context) error {
		if runs.Load() == 1 {
			st, _ := status.New(codes.FailedPrecondition, "insufficient funds").
				WithDetails(&errdetails.ErrorInfo{Reason: "FUNDS"})
			return st.Err()
		}
		return nil
	}
	svc := &service{unary: counting(&runs, fail)}
	t.Run("not stored", func(t *testing.T) {
		runs.Store(0)
		e := setup(t, svc, 1, grpcmw.WithIdempotency(time.Minute))
		r := e.replicas[0]
		_, err := r.call(withIdem("k"), plainMethod, "x")
		wantCode(t, err, codes.FailedPrecondition)
		out, err := r.call(withIdem("k"), plainMethod, "x")
		if err != nil || out != "run-2:x" {
			t.Fatalf("retry after an error: %q %v, want a second run", out, err)
		}
		if out, err := r.call(withIdem("k"), plainMethod, "x"); err != nil || out != "run-2:x" || runs.Load() != 2 {
			t.Fatalf("replay: %q %v after %d runs", out, err, runs.Load())
		}
	})
	t.Run("stored", func(t *testing.T) {
		runs.Store(0)
		e := setup(t, svc, 1, grpcmw.WithIdempotency(time.Minute), grpcmw.WithStoredErrors(codes.FailedPrecondition))
		r := e.replicas[0]
		for range 3 {
			_, err := r.call(withIdem("k"), plainMethod, "x")
			st := wantCode(t, err, codes.FailedPrecondition)
			if st.Message() != "insufficient funds" || len(st.Details()) != 1 {
				t.Fatalf("status %v details %v", st, st.Details())
			}
		}
		if runs.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", runs.Load())
		}
	})
}

func TestIdempotency_replaysTheResponseType(t *testing.T) {
	var runs atomic.Int64
	svc := &service{unary: func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		runs.Add(1)
		return structpb.NewStruct(map[string]any{"id": in.GetValue(), "run": float64(runs.Load()), "tags": []any{"a", "b"}})
	}}
	e := setup(t, svc, 2, grpcmw.WithIdempotency(time.Minute))
	var first *structpb.Struct
	for i := range 3 {
		out := &structpb.Struct{}
		if err := e.replicas[i%2].conn.Invoke(withIdem("s"), plainMethod, wrapperspb.String("x"), out); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = out
		} else if !proto.Equal(first, out) {
			t.Fatalf("replay %v differs from %v", out, first)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
}

func TestIdempotency_scope_andRecordKey(t *testing.T) {
	var runs atomic.Int64
	svc := &service{unary: counting(&runs, func(context.Context) error { return nil })}
	e := setup(t, svc, 1, grpcmw.WithIdempotency(time.Hour))
	r := e.replicas[0]
	// The same key on two methods: two scopes, two runs.
	if _, err := r.call(withIdem("k1"), plainMethod, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.call(withIdem("k1"), keyedMethod, ""); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 2 {
		t.Fatalf("runs %d, want 2", runs.Load())
	}
	records := e.rdb.Keys(context.Background(), "lockkit:idem:{@grpc-idem/*}").Val()
	if len(records) != 2 {
		t.Fatalf("records %q, want 2", records)
	}
	for _, key := range records {
		if ttl := e.rdb.PTTL(context.Background(), key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
			t.Fatalf("record %s has TTL %v, want about 1h", key, ttl)
		}
	}

	// A custom scope keeps tenants apart.
	scope := func(ctx context.Context, fullMethod string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if len(md.Get("tenant")) != 1 {
			return "", status.Error(codes.Unauthenticated, "no tenant")
		}
		return md.Get("tenant")[0] + fullMethod, nil
	}
	r2 := startReplica(t, e.srv, svc, nil, grpcmw.WithIdempotency(0), grpcmw.WithIdempotencyScope(scope))
	for _, tenant := range []string{"t1", "t2", "t1"} {
		ctx := metadata.AppendToOutgoingContext(withIdem("k2"), "tenant", tenant)
		if _, err := r2.call(ctx, plainMethod, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 4 {
		t.Fatalf("runs %d, want 4 (one per tenant)", runs.Load())
	}
	_, err := r2.call(withIdem("k3"), plainMethod, "x")
	wantCode(t, err, codes.Unauthenticated)
}

func TestIdempotency_withBusinessKey_takesBothLocks(t *testing.T) {
	var runs atomic.Int64
	svc := &service{unary: func(ctx context.Context, m string, in *wrapperspb.StringValue) (proto.Message, error) {
		runs.Add(1)
		l, ok := core.FromContext(ctx)
		if !ok || l.Name() != "@grpc/"+in.GetValue() {
			return nil, status.Error(codes.Internal, "not under the business key's lock")
		}
		return wrapperspb.String("ok"), nil
	}}
	e := setup(t, svc, 1, grpcmw.WithIdempotency(time.Minute))
	r := e.replicas[0]
	held := holdLock(t, e, "acct-b", 30*time.Second)
	_, err := r.call(withIdem("kb"), keyedMethod, "acct-b")
	wantCode(t, err, codes.Aborted) // the business key is busy: nothing ran, nothing stored
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if out, err := r.call(withIdem("kb"), keyedMethod, "acct-b"); err != nil || out != "ok" {
			t.Fatalf("%q %v", out, err)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("runs %d, want 1", runs.Load())
	}
}

func TestIdempotency_badKeys(t *testing.T) {
	e := setup(t, &service{unary: echo}, 1, grpcmw.WithIdempotency(time.Minute))
	r := e.replicas[0]
	_, err := r.call(withIdem(strings.Repeat("k", 256)), plainMethod, "x")
	wantCode(t, err, codes.InvalidArgument)
	ctx := metadata.AppendToOutgoingContext(withIdem("a"), grpcmw.IdempotencyKeyHeader, "b")
	_, err = r.call(ctx, plainMethod, "x")
	wantCode(t, err, codes.InvalidArgument)
}

func TestIdempotency_lostLock_storesNothing(t *testing.T) {
	var runs atomic.Int64
	started := make(chan struct{}, 2)
	svc := &service{unary: counting(&runs, func(ctx context.Context) error {
		started <- struct{}{}
		if runs.Load() == 1 {
			<-ctx.Done()
		}
		return nil // success, although the lock was lost
	})}
	e := setup(t, svc, 1, grpcmw.WithIdempotency(time.Minute), grpcmw.WithTTL(300*time.Millisecond))
	r := e.replicas[0]
	done := make(chan error, 1)
	go func() {
		_, err := r.call(withIdem("kl"), plainMethod, "x")
		done <- err
	}()
	<-started
	held := e.rdb.Keys(context.Background(), locktest.Key("@grpc-idem/*")).Val()
	if len(held) != 1 {
		t.Fatalf("idempotency locks %q, want 1", held)
	}
	if n := e.rdb.Del(context.Background(), held[0]).Val(); n != 1 {
		t.Fatalf("deleted %d lock keys", n)
	}
	wantCode(t, <-done, codes.Aborted)
	if out, err := r.call(withIdem("kl"), plainMethod, "x"); err != nil || out != "run-2:x" {
		t.Fatalf("after a lost run: %q %v, want a second run", out, err)
	}
}

// Map fields encode in random order unless marshalled deterministically: equal requests must have
// equal fingerprints. The interceptor is called directly, with a Struct request of many fields.
func TestIdempotency_fingerprintIsDeterministic(t *testing.T) {
	e := setup(t, &service{}, 0)
	ic := grpcmw.UnaryServerInterceptor(locktest.NewClient(t, e.srv.Client(t)), grpcmw.WithIdempotency(time.Minute))
	fields := map[string]any{}
	for i := range 32 {
		fields[fmt.Sprint("field-", i)] = float64(i)
	}
	var runs atomic.Int64
	handler := func(ctx context.Context, req any) (any, error) {
		runs.Add(1)
		return wrapperspb.String("ok"), nil
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(grpcmw.IdempotencyKeyHeader, "det"))
	for range 20 {
		req, err := structpb.NewStruct(fields)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ic(ctx, req, &grpc.UnaryServerInfo{FullMethod: plainMethod}, handler); err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.Load())
	}
}
