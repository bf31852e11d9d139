// Package otel traces and measures lockkit locks with OpenTelemetry: spans for lock waits, holds
// and renewals, and metrics for wait and hold durations, acquisitions, renewals and losses.
//
// Import it beside go.opentelemetry.io/otel as
//
//	import lockotel "github.com/lockkit/lockkit/otel"
package otel
