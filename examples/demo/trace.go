package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/otel/lockotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// serviceName is the service.name of the demo's traces, unless OTEL_SERVICE_NAME says otherwise.
const serviceName = "lockkit-demo"

// maxTraces is how many traces -trace prints per scene.
const maxTraces = 12

// tracing is the demo's OpenTelemetry set-up: off, the terminal (-trace), OTLP, or both.
type tracing struct {
	tracer   trace.Tracer // the demo's own spans (one per unit of work); no-op when off
	hook     *core.Hook   // lockotel's hook for the lock clients; nil when off
	rec      *recorder    // the spans to print; nil without -trace
	about    string       // a line saying where traces go
	shutdown func(context.Context) error
}

// setupTracing builds the TracerProvider: a recorder for -trace, an OTLP/HTTP exporter when
// OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set. The exporter reads the standard
// OTEL_EXPORTER_OTLP_* variables itself.
func setupTracing(ctx context.Context, terminal bool, getenv func(string) string) (*tracing, error) {
	otlp := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if !terminal && !otlp {
		return &tracing{tracer: noop.NewTracerProvider().Tracer(serviceName),
			shutdown: func(context.Context) error { return nil }}, nil
	}
	name := serviceName
	if v := getenv("OTEL_SERVICE_NAME"); v != "" {
		name = v
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	t := &tracing{}
	var about []string
	if terminal {
		t.rec = &recorder{}
		opts = append(opts, sdktrace.WithSpanProcessor(t.rec))
		about = append(about, "span trees after each scene")
	}
	if otlp {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
		endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
		if endpoint == "" {
			endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		}
		about = append(about, fmt.Sprintf("OTLP/HTTP export to %s as service %q", endpoint, name))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	t.tracer = tp.Tracer(serviceName)
	hook := lockotel.Hook(lockotel.WithTracerProvider(tp))
	t.hook = &hook
	t.shutdown = tp.Shutdown
	t.about = "tracing: " + strings.Join(about, "; ")
	return t, nil
}

// recorder is a SpanProcessor that keeps ended spans in memory until drained.
type recorder struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (r *recorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (r *recorder) OnEnd(s sdktrace.ReadOnlySpan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, s)
}

func (r *recorder) Shutdown(context.Context) error   { return nil }
func (r *recorder) ForceFlush(context.Context) error { return nil }

// drain returns the spans ended so far and forgets them.
func (r *recorder) drain() []sdktrace.ReadOnlySpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.spans
	r.spans = nil
	return s
}

// printTraces prints spans as one tree per trace, traces in order of their start, at most max.
func printTraces(w io.Writer, spans []sdktrace.ReadOnlySpan, max int) {
	if len(spans) == 0 {
		return
	}
	byTrace := map[trace.TraceID][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		id := s.SpanContext().TraceID()
		byTrace[id] = append(byTrace[id], s)
	}
	type tr struct {
		id    trace.TraceID
		start time.Time
		spans []sdktrace.ReadOnlySpan
	}
	var traces []tr
	for id, ss := range byTrace {
		slices.SortFunc(ss, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
		traces = append(traces, tr{id, ss[0].StartTime(), ss})
	}
	slices.SortFunc(traces, func(a, b tr) int { return a.start.Compare(b.start) })
	fmt.Fprintf(w, "      spans, by trace (%d):\n", len(traces))
	for i, t := range traces {
		if i == max {
			fmt.Fprintf(w, "      … and %d more traces\n", len(traces)-max)
			break
		}
		inTrace := map[trace.SpanID]bool{}
		children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
		for _, s := range t.spans {
			inTrace[s.SpanContext().SpanID()] = true
		}
		var roots []sdktrace.ReadOnlySpan
		for _, s := range t.spans {
			if p := s.Parent().SpanID(); s.Parent().IsValid() && inTrace[p] {
				children[p] = append(children[p], s)
			} else {
				roots = append(roots, s)
			}
		}
		for _, r := range roots {
			printSpan(w, "      "+t.id.String()[:8]+" ", "", r, children)
		}
	}
}

// printSpan prints s and its children, with box-drawing prefixes.
func printSpan(w io.Writer, lead, prefix string, s sdktrace.ReadOnlySpan, children map[trace.SpanID][]sdktrace.ReadOnlySpan) {
	const col = 84
	text := lead + prefix + s.Name() + " " + describe(s)
	pad := max(1, col-utf8.RuneCountInString(text))
	fmt.Fprintf(w, "%s%s%s\n", text, strings.Repeat(" ", pad), fmtDur(s.EndTime().Sub(s.StartTime())))
	kids := children[s.SpanContext().SpanID()]
	indent := strings.Repeat(" ", utf8.RuneCountInString(lead))
	// The children's prefix continues this span's branch line, if any.
	base := strings.NewReplacer("├─ ", "│  ", "└─ ", "   ").Replace(prefix)
	for i, k := range kids {
		branch := "├─ "
		if i == len(kids)-1 {
			branch = "└─ "
		}
		printSpan(w, indent, base+branch, k, children)
	}
}

// describe summarises a span's attributes: the lock's outcome, fence, renewals.
func describe(s sdktrace.ReadOnlySpan) string {
	a := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		a[kv.Key] = kv.Value
	}
	get := func(k string) string {
		if v, ok := a[attribute.Key(k)]; ok {
			return v.String()
		}
		return ""
	}
	name := get("lockkit.lock.name")
	if utf8.RuneCountInString(name) > 20 { // idempotency locks are named by a hash
		name = string([]rune(name)[:17]) + "…"
	}
	var parts []string
	switch s.Name() {
	case "lock.wait":
		parts = append(parts, name, get("lockkit.lock.outcome"))
		if n := get("lockkit.lock.attempts"); n != "" && n != "1" {
			parts = append(parts, n+" attempts")
		}
		woken := 0
		for _, e := range s.Events() {
			for _, kv := range e.Attributes {
				if kv.Key == "lockkit.lock.woken" && kv.Value.AsBool() {
					woken++
				}
			}
		}
		if woken > 0 {
			parts = append(parts, fmt.Sprintf("(%d woken)", woken))
		}
	case "lock.hold":
		parts = append(parts, name, "fence="+get("lockkit.lock.fence"), get("lockkit.lock.hold.outcome"))
		if r := get("lockkit.lock.lost.reason"); r != "" {
			parts = append(parts, "reason="+r)
		}
	case "lock.renew":
		parts = append(parts, get("lockkit.lock.renew.outcome"))
	}
	if s.Status().Code == codes.Error {
		parts = append(parts, "✗")
	}
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() != s.SpanContext().TraceID() {
			parts = append(parts, "(linked to "+l.SpanContext.TraceID().String()[:8]+")")
		}
	}
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), " ")
}
