package grpcmw_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// WithLimit: up to n calls of a key run at once over two replicas; the next one fails with
// RESOURCE_EXHAUSTED and a RetryInfo from the permits' TTL.
func TestUnary_withLimit(t *testing.T) {
	var inside, maxInside atomic.Int64
	entered := make(chan struct{}, 8)
	unblock := make(chan struct{})
	svc := &service{unary: func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		if l, ok := core.FromContext(ctx); !ok || l.Limit() != 2 {
			return nil, errors.New("handler runs without a permit")
		}
		n := inside.Add(1)
		defer inside.Add(-1)
		for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
		}
		entered <- struct{}{}
		<-unblock
		return wrapperspb.String("ok"), nil
	}}
	e := setup(t, svc, 2, grpcmw.WithLimit(2), grpcmw.WithTTL(3*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if _, err := e.replicas[i].call(ctx, keyedMethod, "acct-1"); err != nil {
				t.Error(err)
			}
		})
	}
	<-entered
	<-entered
	_, err := e.replicas[0].call(ctx, keyedMethod, "acct-1")
	st := wantCode(t, err, codes.ResourceExhausted)
	if d := retryDelay(t, st); d <= 2*time.Second || d > 3*time.Second {
		t.Errorf("RetryInfo delay %v, want the permits' remaining TTL (~3s)", d)
	}
	close(unblock)
	wg.Wait()
	if maxInside.Load() != 2 {
		t.Fatalf("max in flight %d, want 2", maxInside.Load())
	}
	if _, err := e.replicas[1].call(ctx, keyedMethod, "acct-1"); err != nil {
		t.Fatal(err)
	}
}

func TestWithLimit_invalid(t *testing.T) {
	for name, opts := range map[string][]grpcmw.Option{
		"zero":        {grpcmw.WithLimit(0)},
		"huge":        {grpcmw.WithLimit(100001)},
		"idempotency": {grpcmw.WithLimit(2), grpcmw.WithIdempotency(time.Hour)},
	} {
		func() {
			defer func() {
				if err, _ := recover().(error); !errors.Is(err, core.ErrInvalid) {
					t.Errorf("%s: panicked with %v, want ErrInvalid", name, err)
				}
			}()
			grpcmw.UnaryServerInterceptor(&core.Client{}, opts...)
		}()
	}
}

// WithLimit on the stream interceptor: streams of one key run up to n at once.
func TestStream_withLimit(t *testing.T) {
	var inside, maxInside atomic.Int64
	svc := &service{watch: func(in *wrapperspb.StringValue, ss grpc.ServerStream) error {
		if l, ok := core.FromContext(ss.Context()); !ok || l.Limit() != 2 {
			return status.Error(codes.Internal, "stream handler runs without a permit")
		}
		n := inside.Add(1)
		defer inside.Add(-1)
		for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
		}
		time.Sleep(5 * time.Millisecond) // work under the permit: a window for a third to overlap
		return ss.SendMsg(wrapperspb.String(in.GetValue()))
	}}
	e := setup(t, svc, 2, grpcmw.WithKey(grpcmw.ByMetadata("x-account")), grpcmw.WithLimit(2), grpcmw.WithWait(10*time.Second))
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			if _, err := e.replicas[i%2].watch(withAccount("acct-l"), "acct-l"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if maxInside.Load() != 2 {
		t.Fatalf("max streams at once %d, want 2", maxInside.Load())
	}
}
