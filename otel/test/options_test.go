package otel_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/otel/lockotel"
)

func TestWithKeyAttribute(t *testing.T) {
	e := setup(t, lockotel.WithKeyAttribute())
	if err := e.c.Do(context.Background(), "user:42", time.Second, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"lock.wait", "lock.hold"} {
		wantAttrs(t, s, e.only(t, s).Attributes(), map[string]string{"lockkit.lock.key": locktest.Key("user:42")})
	}
	// Never on metrics.
	for name, m := range e.metrics(t) {
		var sets []attribute.Set
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		case metricdata.Histogram[float64]:
			for _, dp := range d.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		}
		if len(sets) == 0 {
			t.Errorf("metric %s has no data points", name)
		}
		for _, s := range sets {
			for _, kv := range s.ToSlice() {
				if strings.HasPrefix(string(kv.Key), "lockkit.lock.key") || strings.Contains(kv.Value.String(), "user:42") {
					t.Errorf("metric %s carries %s=%s", name, kv.Key, kv.Value.String())
				}
			}
		}
	}
}

func TestWithNameOnMetrics(t *testing.T) {
	prefix := func(name string) string { p, _, _ := strings.Cut(name, ":"); return p }
	e := setup(t, lockotel.WithNameOnMetrics(prefix))
	for _, name := range []string{"order:1", "order:2", "user:1"} {
		if err := e.c.Do(context.Background(), name, time.Second, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.sum(t, "lockkit.lock.acquisitions", set("lockkit.lock.outcome", "acquired", "lockkit.lock.name", "order")); got != 2 {
		t.Errorf("acquisitions{order} = %d, want 2", got)
	}
	if got := e.hist(t, "lockkit.lock.hold.duration", set("lockkit.lock.hold.outcome", "released", "lockkit.lock.name", "user")); got.Count != 1 {
		t.Errorf("hold.duration{user} count %d, want 1", got.Count)
	}
	if got := e.sum(t, "lockkit.lock.held", set("lockkit.lock.name", "order")); got != 0 {
		t.Errorf("held{order} = %d, want 0", got)
	}
	// Spans keep the full name.
	wantAttrs(t, "lock.hold", e.spans("lock.hold")[0].Attributes(), map[string]string{"lockkit.lock.name": "order:1"})
}

// Without WithNameOnMetrics, metrics carry no name at all.
func TestMetrics_no_name_by_default(t *testing.T) {
	e := setup(t)
	for _, name := range []string{"a", "b"} {
		if err := e.c.Do(context.Background(), name, time.Second, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.sum(t, "lockkit.lock.acquisitions", set("lockkit.lock.outcome", "acquired")); got != 2 {
		t.Errorf("acquisitions{acquired} = %d, want 2 in one series", got)
	}
}

// failingMeter fails to create every instrument, as a misconfigured SDK might.
type failingMeter struct{ noop.Meter }

var errInstrument = errors.New("instrument refused")

func (failingMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return nil, errInstrument
}
func (failingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errInstrument
}
func (failingMeter) Int64UpDownCounter(string, ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	return nil, errInstrument
}

type failingProvider struct{ noop.MeterProvider }

func (failingProvider) Meter(string, ...metric.MeterOption) metric.Meter { return failingMeter{} }

func TestHook_instrument_errors_go_to_otel_Handle(t *testing.T) {
	var mu sync.Mutex
	var got []error
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		got = append(got, err)
		mu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })

	e := setup(t, lockotel.WithMeterProvider(failingProvider{}))
	mu.Lock()
	n := len(got)
	for _, err := range got {
		if !errors.Is(err, errInstrument) {
			t.Errorf("handled %v", err)
		}
	}
	mu.Unlock()
	if n != 6 {
		t.Errorf("%d errors handled, want one per instrument (6)", n)
	}
	// Locks work, and are still traced.
	if err := e.c.Do(context.Background(), "still", time.Second, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	e.only(t, "lock.hold")
}

// With no options the hook uses the global providers, read when Hook is called.
func TestHook_global_providers(t *testing.T) {
	e := setup(t)
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	h := lockotel.Hook()
	otel.SetTracerProvider(prev)
	c, err := core.New(e.rdb, core.WithHook(h))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if err := c.Do(context.Background(), "global", time.Second, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := names(sr.Ended()); len(got) != 2 {
		t.Errorf("global provider recorded %v, want lock.wait and lock.hold", got)
	}
}
