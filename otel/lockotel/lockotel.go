package lockotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/core"
)

const (
	// ScopeName is the instrumentation scope name of the tracer and the meter.
	ScopeName = "github.com/lockkit/lockkit/otel/lockotel"
	// Version is the version of this instrumentation, reported as the scope version.
	Version = "0.1.0"
)

// Option configures the hook returned by Hook.
type Option func(*options)

type options struct {
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	key        bool
	renewEvent bool
	metricName func(string) string
}

// WithTracerProvider sets the TracerProvider spans are created with (default: the global one,
// otel.GetTracerProvider, read when Hook is called).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) {
		if tp != nil {
			o.tp = tp
		}
	}
}

// WithMeterProvider sets the MeterProvider the instruments are created with (default: the global
// one, otel.GetMeterProvider, read when Hook is called).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) {
		if mp != nil {
			o.mp = mp
		}
	}
}

// WithKeyAttribute records the lock's full Redis key as lockkit.lock.key on spans. It is off by
// default because keys may embed user data; the lock name is always recorded. Keys never go on
// metrics.
func WithKeyAttribute() Option {
	return func(o *options) { o.key = true }
}

// WithRenewalEvents records each renewal as a "lock.renew" event on the lock.hold span instead of
// a lock.renew child span: for very long holds, whose renewals would otherwise fill the trace.
func WithRenewalEvents() Option {
	return func(o *options) { o.renewEvent = true }
}

// WithNameOnMetrics adds lockkit.lock.name to every metric, with the value fn(name); an empty
// result leaves it out. Without it metrics carry no lock name, as names often embed IDs
// ("order:42") and every distinct value is a new time series. Map names to a small, bounded set,
// for example the part before the first ':'.
func WithNameOnMetrics(fn func(name string) string) Option {
	return func(o *options) { o.metricName = fn }
}

// Hook returns a core.Hook that traces and measures locks. Install it with core.WithHook:
//
//	c, err := core.New(rdb, core.WithHook(lockotel.Hook()))
//
// The providers are read and the instruments created once, here; an instrument that cannot be
// created is reported to otel.Handle and replaced by a no-op one, so instrumentation never makes a
// lock fail. The hook is safe to share between clients.
func Hook(opts ...Option) core.Hook {
	o := options{}
	for _, f := range opts {
		f(&o)
	}
	if o.tp == nil {
		o.tp = otel.GetTracerProvider()
	}
	if o.mp == nil {
		o.mp = otel.GetMeterProvider()
	}
	h := &hook{
		opt:       o,
		tracer:    o.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version)),
		startOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)},
	}
	h.attrs.New = func() any { b := make([]attribute.KeyValue, 0, 10); return &b }
	h.m.init(o.mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version)))
	return core.Hook{
		WaitStart: h.waitStart,
		Attempt:   h.attempt,
		WaitDone:  h.waitDone,
		Acquired:  h.acquired,
		Renewed:   h.renewed,
		Lost:      h.lost,
		Released:  h.released,
	}
}
