package grpcmw_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkUnaryOverhead measures what the unary interceptor adds to an uncontended call, Redis
// time excluded: the interceptor is called directly with a no-op handler, and a baseline does the
// same work with core directly (TryAcquire, the handler with the lock's context, Release), against
// the same Redis. Sub-benchmarks:
//
//   - core: the baseline alone;
//   - interceptor: the interceptor alone;
//   - overhead: both alternately in one loop (so that drift in Redis latency hits both alike),
//     reporting the per-call difference (overhead-ns/op: mean of the middle 80%; overhead-p50-ns:
//     median) and the difference in allocations (overhead-allocs).
func BenchmarkUnaryOverhead(b *testing.B) {
	srv := redistest.Start(b)
	locks := locktest.NewClient(b, srv.Client(b))
	const ttl = 10 * time.Second // the interceptor's default
	ctx := context.Background()
	ic := grpcmw.UnaryServerInterceptor(locks, grpcmw.WithTTL(ttl))
	info := &grpc.UnaryServerInfo{FullMethod: keyedMethod}
	req := keyed{wrapperspb.String("bench-acct")}
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }

	baseline := func() {
		l, err := locks.TryAcquire(ctx, "bench-acct", ttl)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := handler(l.Context(), req); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	intercepted := func() {
		if _, err := ic(ctx, req, info, handler); err != nil {
			b.Fatal(err)
		}
	}
	for range 100 { // warm: scripts loaded, connections open
		baseline()
		intercepted()
	}
	b.Run("core", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			baseline()
		}
	})
	b.Run("interceptor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			intercepted()
		}
	})
	b.Run("overhead", func(b *testing.B) {
		diffs := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			baseline()
			t1 := time.Now()
			intercepted()
			diffs = append(diffs, time.Since(t1)-t1.Sub(t0))
		}
		b.StopTimer()
		slices.Sort(diffs)
		// Mean of the middle 80%: scheduler and GC pauses of a shared machine land on one side
		// or the other of a pair and would otherwise dominate the mean.
		var sum time.Duration
		mid := diffs[len(diffs)/10 : len(diffs)-len(diffs)/10]
		for _, d := range mid {
			sum += d
		}
		b.ReportMetric(float64(sum.Nanoseconds())/float64(len(mid)), "overhead-ns/op")
		b.ReportMetric(float64(diffs[len(diffs)/2].Nanoseconds()), "overhead-p50-ns")
		b.ReportMetric(testing.AllocsPerRun(200, intercepted)-testing.AllocsPerRun(200, baseline), "overhead-allocs")
	})
}

// BenchmarkUnaryPassThrough is a call without a key: the cost of the interceptor on methods that
// take no lock (no Redis involved).
func BenchmarkUnaryPassThrough(b *testing.B) {
	srv := redistest.Start(b)
	locks := locktest.NewClient(b, srv.Client(b))
	ic := grpcmw.UnaryServerInterceptor(locks, grpcmw.WithKey(grpcmw.ByMetadata("x-account")))
	info := &grpc.UnaryServerInfo{FullMethod: plainMethod}
	req := wrapperspb.String("x")
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ic(ctx, req, info, handler); err != nil {
			b.Fatal(err)
		}
	}
}
