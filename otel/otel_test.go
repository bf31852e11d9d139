package otel

import (
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lockkit/lockkit/otel/lockotel"
)

// namingProvider is a no-op TracerProvider that records the names tracers are asked for.
type namingProvider struct {
	noop.TracerProvider
	names []string
}

func (p *namingProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	p.names = append(p.names, name)
	return p.TracerProvider.Tracer(name, opts...)
}

// The forwarder's Hook is lockotel's, with the options passed through.
func TestHook_forwards_to_lockotel(t *testing.T) {
	tp := &namingProvider{}
	h := Hook(WithTracerProvider(tp), WithKeyAttribute(), WithRenewalEvents(),
		WithNameOnMetrics(func(string) string { return "" }))
	if len(tp.names) != 1 || tp.names[0] != lockotel.ScopeName {
		t.Fatalf("tracers asked for %q, want [%q]", tp.names, lockotel.ScopeName)
	}
	if h.WaitStart == nil || h.Acquired == nil || h.Renewed == nil || h.Lost == nil || h.Released == nil {
		t.Fatalf("hook %+v has unset funcs", h)
	}
	if ScopeName != lockotel.ScopeName || Version != lockotel.Version {
		t.Fatalf("scope %s %s, want %s %s", ScopeName, Version, lockotel.ScopeName, lockotel.Version)
	}
}
