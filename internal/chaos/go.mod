module github.com/lockkit/lockkit/internal/chaos

go 1.26.0

replace (
	github.com/lockkit/lockkit => ../../
	github.com/lockkit/lockkit/examples => ../../examples
	github.com/lockkit/lockkit/internal/pgtest => ../pgtest
	github.com/lockkit/lockkit/jobs/asynqlock => ../../jobs/asynqlock
	github.com/lockkit/lockkit/jobs/cronlock => ../../jobs/cronlock
	github.com/lockkit/lockkit/jobs/gocronlock => ../../jobs/gocronlock
	github.com/lockkit/lockkit/lockkittest => ../../lockkittest
	github.com/lockkit/lockkit/middleware/grpcmw => ../../middleware/grpcmw
	github.com/lockkit/lockkit/otel => ../../otel
)

require (
	github.com/Shopify/toxiproxy/v2 v2.12.0
	github.com/anishathalye/porcupine v1.3.1
	github.com/jackc/pgx/v5 v5.12.0
	github.com/lockkit/lockkit v0.1.0
	github.com/lockkit/lockkit/examples v0.0.0-00010101000000-000000000000
	github.com/lockkit/lockkit/internal/pgtest v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	github.com/rs/zerolog v1.33.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gorilla/mux v1.8.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/klauspost/compress v1.17.11 // indirect
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.21.1 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/prometheus/common v0.62.0 // indirect
	github.com/prometheus/procfs v0.15.1 // indirect
	github.com/rs/xid v1.5.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/tomb.v1 v1.0.0-20141024135613-dd632973f1e7 // indirect
)
