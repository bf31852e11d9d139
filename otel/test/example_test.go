package otel_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/otel/lockotel"
)

// Export traces over OTLP/HTTP to a collector or Jaeger when OTEL_EXPORTER_OTLP_ENDPOINT is set
// (for example to http://localhost:4318); otlptracehttp and the resource read the standard
// OTEL_* variables.
func ExampleHook_otlp() {
	ctx := context.Background()
	var opts []core.Option
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			log.Fatal(err)
		}
		res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "lockkit-demo")),
			resource.WithFromEnv()) // OTEL_SERVICE_NAME wins
		if err != nil {
			log.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		defer tp.Shutdown(context.WithoutCancel(ctx)) // flushes the last spans on exit
		otel.SetTracerProvider(tp)
		opts = append(opts, core.WithHook(lockotel.Hook(lockotel.WithTracerProvider(tp))))
	}
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := core.New(rdb, opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(ctx)

	// One span per unit of work, so that its lock.wait and lock.hold share a trace.
	jctx, job := otel.Tracer("demo").Start(ctx, "job")
	defer job.End()
	_ = locks.Do(jctx, "demo", 2*time.Second, func(ctx context.Context) error { return nil })
}
