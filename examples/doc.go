// Package examples holds runnable example programs; each subdirectory is a main package with its own
// README. Start with `go run ./examples/demo`, which needs no Redis.
package examples
