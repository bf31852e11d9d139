// Package otel is the former path of package lockotel, kept for one release so that programs
// importing it build while they move.
//
// Deprecated: import github.com/lockkit/lockkit/otel/lockotel, whose name needs no alias beside
// go.opentelemetry.io/otel. Every name here forwards to the same name there. This package will be
// removed in v0.3.0.
package otel

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/otel/lockotel"
)

const (
	// ScopeName is lockotel.ScopeName.
	//
	// Deprecated: use lockotel.ScopeName.
	ScopeName = lockotel.ScopeName
	// Version is lockotel.Version.
	//
	// Deprecated: use lockotel.Version.
	Version = lockotel.Version
)

// Option is lockotel.Option.
//
// Deprecated: use lockotel.Option.
type Option = lockotel.Option

// WithTracerProvider is lockotel.WithTracerProvider.
//
// Deprecated: use lockotel.WithTracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option { return lockotel.WithTracerProvider(tp) }

// WithMeterProvider is lockotel.WithMeterProvider.
//
// Deprecated: use lockotel.WithMeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option { return lockotel.WithMeterProvider(mp) }

// WithKeyAttribute is lockotel.WithKeyAttribute.
//
// Deprecated: use lockotel.WithKeyAttribute.
func WithKeyAttribute() Option { return lockotel.WithKeyAttribute() }

// WithRenewalEvents is lockotel.WithRenewalEvents.
//
// Deprecated: use lockotel.WithRenewalEvents.
func WithRenewalEvents() Option { return lockotel.WithRenewalEvents() }

// WithNameOnMetrics is lockotel.WithNameOnMetrics.
//
// Deprecated: use lockotel.WithNameOnMetrics.
func WithNameOnMetrics(fn func(name string) string) Option { return lockotel.WithNameOnMetrics(fn) }

// Hook is lockotel.Hook.
//
// Deprecated: use lockotel.Hook.
func Hook(opts ...Option) core.Hook { return lockotel.Hook(opts...) }
