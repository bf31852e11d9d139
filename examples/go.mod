module github.com/lockkit/lockkit/examples

go 1.26.0

replace (
	github.com/lockkit/lockkit => ../
	github.com/lockkit/lockkit/internal/pgtest => ../internal/pgtest
	github.com/lockkit/lockkit/jobs/asynqlock => ../jobs/asynqlock
	github.com/lockkit/lockkit/jobs/cronlock => ../jobs/cronlock
	github.com/lockkit/lockkit/jobs/gocronlock => ../jobs/gocronlock
	github.com/lockkit/lockkit/lockkittest => ../lockkittest
	github.com/lockkit/lockkit/middleware/grpcmw => ../middleware/grpcmw
	github.com/lockkit/lockkit/otel => ../otel
)

require (
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/google/uuid v1.6.0
	github.com/hibiken/asynq v0.26.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/jonboulle/clockwork v0.5.0
	github.com/lockkit/lockkit v0.1.0
	github.com/lockkit/lockkit/internal/pgtest v0.0.0-00010101000000-000000000000
	github.com/lockkit/lockkit/jobs/asynqlock v0.0.0-00010101000000-000000000000
	github.com/lockkit/lockkit/jobs/cronlock v0.0.0-00010101000000-000000000000
	github.com/lockkit/lockkit/jobs/gocronlock v0.0.0-00010101000000-000000000000
	github.com/lockkit/lockkit/lockkittest v0.0.0-00010101000000-000000000000
	github.com/lockkit/lockkit/middleware/grpcmw v0.0.0-00010101000000-000000000000
	github.com/lockkit/lockkit/otel v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	github.com/robfig/cron/v3 v3.0.1
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
	go.opentelemetry.io/proto/otlp v1.11.1
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.31.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/spf13/cast v1.10.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/time v0.14.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b // indirect
)
