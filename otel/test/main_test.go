package otel_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/otel/lockotel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a Redis server, a core client with the otel hook, and the recorders behind it.
type env struct {
	srv    *redistest.Server
	rdb    *redis.Client
	cmds   *cmdSpans
	hook   core.Hook
	c      *core.Client
	sr     *tracetest.SpanRecorder
	tracer trace.Tracer
	reader *sdkmetric.ManualReader
}

func setup(t *testing.T, opts ...lockotel.Option) *env {
	t.Helper()
	e := &env{srv: redistest.Start(t), sr: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.sr))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	e.tracer = tp.Tracer("test")
	e.hook = lockotel.Hook(append([]lockotel.Option{lockotel.WithTracerProvider(tp), lockotel.WithMeterProvider(mp)}, opts...)...)
	e.rdb = e.srv.Client(t)
	e.cmds = &cmdSpans{}
	e.rdb.AddHook(e.cmds)
	e.c = e.client(t)
	return e
}

// client returns another core client with the env's hook, closed when the test ends.
func (e *env) client(t *testing.T, opts ...core.Option) *core.Client {
	t.Helper()
	c, err := core.New(e.rdb, append([]core.Option{core.WithHook(e.hook)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// cmdSpans is a go-redis hook recording the span each command was sent under, as redisotel
// would see it.
type cmdSpans struct {
	mu  sync.Mutex
	got []cmdSpan
}

type cmdSpan struct {
	name string
	span trace.SpanID
}

func (h *cmdSpans) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cmdSpans) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.got = append(h.got, cmdSpan{cmd.Name(), trace.SpanContextFromContext(ctx).SpanID()})
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *cmdSpans) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// under returns the names of the commands sent under span.
func (h *cmdSpans) under(span trace.SpanID) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.got {
		if c.span == span {
			out = append(out, c.name)
		}
	}
	return out
}

// spans returns the ended spans called name.
func (e *env) spans(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.sr.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// await waits until at least n spans called name have ended.
func (e *env) await(t *testing.T, name string, n int) {
	t.Helper()
	locktest.Eventually(t, 5*time.Second, fmt.Sprintf("%d %s span(s) ended", n, name), func() bool { return len(e.spans(name)) >= n })
}

// only returns the one ended span called name.
func (e *env) only(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	ss := e.spans(name)
	if len(ss) != 1 {
		t.Fatalf("%d %s spans, want 1 (ended: %v)", len(ss), name, names(e.sr.Ended()))
	}
	return ss[0]
}

func names(ss []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name())
	}
	return out
}

// attrs returns a span's (or event's) attributes by key, as strings.
func attrs(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// wantAttrs fails unless every key of want has that value (an empty value: the key is absent).
func wantAttrs(t *testing.T, what string, kvs []attribute.KeyValue, want map[string]string) {
	t.Helper()
	got := attrs(kvs)
	for k, v := range want {
		g, ok := got[k]
		if v == "" && ok {
			t.Errorf("%s: attribute %s = %q, want none", what, k, g)
		} else if v != "" && g != v {
			t.Errorf("%s: attribute %s = %q, want %q (all: %v)", what, k, g, v, got)
		}
	}
}

// wantChild fails unless child's parent is parent, in the same trace.
func wantChild(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("%s: parent %s, want %s (%s)", child.Name(), child.Parent().SpanID(), parent.SpanContext().SpanID(), parent.Name())
	}
}

// noToken fails if a token appears in any attribute of any recorded span or event.
func (e *env) noToken(t *testing.T, tokens ...string) {
	t.Helper()
	for _, s := range e.sr.Ended() {
		kvs := slices.Clone(s.Attributes())
		for _, ev := range s.Events() {
			kvs = append(kvs, ev.Attributes...)
		}
		for _, kv := range kvs {
			for _, tok := range tokens {
				if strings.Contains(kv.Value.String(), tok) {
					t.Errorf("span %s attribute %s carries the owner token", s.Name(), kv.Key)
				}
			}
		}
	}
}

// metrics collects the env's metrics by name.
func (e *env) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := e.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != lockotel.ScopeName || sm.Scope.Version != lockotel.Version {
			t.Errorf("scope %s %s", sm.Scope.Name, sm.Scope.Version)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// set builds an attribute set from key, value pairs.
func set(kv ...string) attribute.Set {
	var out []attribute.KeyValue
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, attribute.String(kv[i], kv[i+1]))
	}
	return attribute.NewSet(out...)
}

// sum returns the value of a counter (or up-down counter) for the attribute set, 0 if absent.
func (e *env) sum(t *testing.T, name string, s attribute.Set) int64 {
	t.Helper()
	m, ok := e.metrics(t)[name]
	if !ok {
		return 0
	}
	d, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want a Sum[int64]", name, m.Data)
	}
	for _, dp := range d.DataPoints {
		if dp.Attributes.Equals(&s) {
			return dp.Value
		}
	}
	return 0
}

// hist returns a histogram's data point for the attribute set (Count 0 if absent).
func (e *env) hist(t *testing.T, name string, s attribute.Set) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m, ok := e.metrics(t)[name]
	if !ok {
		return metricdata.HistogramDataPoint[float64]{}
	}
	if m.Unit != "s" {
		t.Errorf("%s unit %q, want s", name, m.Unit)
	}
	d, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a Histogram[float64]", name, m.Data)
	}
	for _, dp := range d.DataPoints {
		if dp.Attributes.Equals(&s) {
			return dp
		}
	}
	return metricdata.HistogramDataPoint[float64]{}
}

// redisClient returns a go-redis client, closed when the test ends.
func redisClient(t *testing.T, o *redis.Options) *redis.Client {
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
