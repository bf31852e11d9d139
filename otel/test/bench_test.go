package otel_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/otel/lockotel"
)

// discard is a span exporter that drops everything.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkLockUnlock measures uncontended lock+unlock (a distinct name per goroutine) without a
// hook, with the hook over no-op providers, with the hook over the tracing SDK (AlwaysSample, a
// batch span processor exporting to a discarding exporter; no-op metrics), and with the metrics
// SDK as well (a manual reader aggregating). Each case has its own redis-server; compare them
// within one run.
func BenchmarkLockUnlock(b *testing.B) {
	for _, g := range []int{1, 16} {
		for _, hook := range []string{"none", "noop", "sdk", "sdk+metrics", "sdk-floor"} {
			srv := redistest.Start(b)
			o := srv.Options()
			o.PoolSize, o.MinIdleConns = g, g
			rdb := redis.NewClient(o)
			b.Cleanup(func() { _ = rdb.Close() })
			var opts []core.Option
			switch hook {
			case "noop":
				opts = append(opts, core.WithHook(lockotel.Hook(
					lockotel.WithTracerProvider(tracenoop.NewTracerProvider()),
					lockotel.WithMeterProvider(metricnoop.NewMeterProvider()))))
			case "sdk", "sdk+metrics":
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
					sdktrace.WithBatcher(discard{}))
				var mp metric.MeterProvider = metricnoop.NewMeterProvider()
				if hook == "sdk+metrics" {
					smp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
					b.Cleanup(func() { _ = smp.Shutdown(context.Background()) })
					mp = smp
				}
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				opts = append(opts, core.WithHook(lockotel.Hook(lockotel.WithTracerProvider(tp),
					lockotel.WithMeterProvider(mp))))
			}
			if hook == "sdk-floor" {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
					sdktrace.WithBatcher(discard{}))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				opts = append(opts, core.WithHook(bareSpans(tp.Tracer("floor"))))
			}
			c, err := core.New(rdb, opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close(context.Background()) })
			b.Run(fmt.Sprintf("hook=%s/g=%d", hook, g), func(b *testing.B) {
				runParallel(b, srv, g, func(i int) func(ctx context.Context) error {
					name := "bench:" + strconv.Itoa(i)
					return func(ctx context.Context) error {
						l, err := c.Acquire(ctx, name, time.Second)
						if err != nil {
							return err
						}
						return l.Release(ctx)
					}
				})
			})
		}
	}
}

// bareSpans is the floor of any tracing through the hook: a wait span and a hold span, with no
// attribute, event, link or metric.
func bareSpans(tr trace.Tracer) core.Hook {
	return core.Hook{
		WaitStart: func(ctx context.Context, _ core.WaitInfo) context.Context {
			ctx, _ = tr.Start(ctx, "lock.wait")
			return ctx
		},
		WaitDone: func(ctx context.Context, _ core.WaitInfo) { trace.SpanFromContext(ctx).End() },
		Acquired: func(ctx context.Context, _ core.HoldInfo) context.Context {
			ctx, _ = tr.Start(ctx, "lock.hold")
			return ctx
		},
		Released: func(ctx context.Context, _ core.HoldInfo) { trace.SpanFromContext(ctx).End() },
	}
}

// runParallel runs b.N operations spread over g goroutines, each with its own op. Besides time per
// op, it reports the CPU time per op of this process and of the redis-server: on a shared machine
// they vary less than throughput, and their sum is what a CPU-bound run pays per op.
func runParallel(b *testing.B, srv *redistest.Server, g int, mk func(i int) func(context.Context) error) {
	b.ReportAllocs()
	ctx := context.Background()
	ops := make([]func(context.Context) error, g)
	for i := range ops {
		ops[i] = mk(i)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, g)
	cpu0, rcpu0 := processCPU(), redisCPU(b, srv)
	b.ResetTimer()
	for _, op := range ops {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu, rcpu := processCPU()-cpu0, redisCPU(b, srv)-rcpu0
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(rcpu.Nanoseconds())/float64(b.N), "redis-cpu-ns/op")
}

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU returns the CPU time the redis-server has used (INFO cpu).
func redisCPU(b *testing.B, srv *redistest.Server) time.Duration {
	info, _ := srv.Do(b, "INFO", "cpu").(string)
	var total float64
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// BenchmarkHookOnly runs the hook's calls for one lock+unlock without Redis: the CPU the hook
// adds to each lock.
func BenchmarkHookOnly(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discard{}))
	defer tp.Shutdown(context.Background())
	for _, hook := range []string{"noop", "sdk"} {
		var h core.Hook
		if hook == "noop" {
			h = lockotel.Hook(lockotel.WithTracerProvider(tracenoop.NewTracerProvider()),
				lockotel.WithMeterProvider(metricnoop.NewMeterProvider()))
		} else {
			h = lockotel.Hook(lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(metricnoop.NewMeterProvider()))
		}
		b.Run("hook="+hook, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				info := core.WaitInfo{Name: "bench", Key: locktest.Key("bench"), TTL: time.Second}
				for pb.Next() {
					ctx := context.Background()
					wctx := h.WaitStart(ctx, info)
					if wctx == nil {
						wctx = ctx
					}
					h.Attempt(wctx, core.WaitInfo{Name: info.Name, Attempts: 1, Acquired: true})
					h.WaitDone(wctx, core.WaitInfo{Name: info.Name, Attempts: 1, Outcome: "acquired", Duration: time.Millisecond})
					// A nil *core.Lock answers zero values: the hook's own cost, without a lock.
					lctx := h.Acquired(wctx, core.HoldInfo{TTL: time.Second, Held: 1})
					h.Released(lctx, core.HoldInfo{Held: -1, Last: true})
				}
			})
		})
	}
}
