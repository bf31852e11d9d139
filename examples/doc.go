// Package examples holds runnable example programs, each in a subdirectory with its own README:
// demo (start here: `go run ./examples/demo`, no Redis needed), httpidempotency, grpcserver,
// asynqworkers, cronreplicas and fencing (with its fenced resources in fencing/fenced); jaeger holds
// a docker-compose file for viewing the demo's traces.
package examples
