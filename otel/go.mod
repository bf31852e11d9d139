module github.com/lockkit/lockkit/otel

go 1.26.0

require (
	github.com/lockkit/lockkit v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/metric v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

// For development in this repository only: the go command ignores replace directives in the
// go.mod of a dependency, and scripts/modcheck.sh builds this module without it. A release sets
// the require above to the root's new tag (see docs/releasing.md).
replace github.com/lockkit/lockkit => ../
