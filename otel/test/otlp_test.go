package otel_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/otel/lockotel"
)

// receiver is an OTLP/HTTP trace endpoint: it decodes ExportTraceServiceRequest protobufs.
type receiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	scope map[string]string // span ID -> instrumentation scope name
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a POST of protobuf to /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				rc.spans = append(rc.spans, s)
				rc.scope[hex.EncodeToString(s.GetSpanId())] = ss.GetScope().GetName()
			}
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (rc *receiver) byName() map[string]*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m := map[string]*tracepb.Span{}
	for _, s := range rc.spans {
		m[s.GetName()] = s
	}
	return m
}

// The demo's setup: OTEL_EXPORTER_OTLP_ENDPOINT names the collector, a batch span processor sends
// to it over OTLP/HTTP.
func TestOTLP_end_to_end(t *testing.T) {
	rc := &receiver{scope: map[string]string{}}
	collector := httptest.NewServer(rc)
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")

	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := tracetest.NewSpanRecorder() // to know when the renewal's span has ended
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(50*time.Millisecond)),
		sdktrace.WithSpanProcessor(seen))
	defer tp.Shutdown(ctx)

	rdb := redistest.Start(t).Client(t)
	c, err := core.New(rdb, core.WithHook(lockotel.Hook(lockotel.WithTracerProvider(tp))), core.WithRenewRatio(0.05))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	rctx, req := tp.Tracer("test").Start(ctx, "request")
	err = c.Do(rctx, "export", time.Second, func(ctx context.Context) error {
		_, work := tp.Tracer("test").Start(ctx, "work")
		defer work.End()
		// Hold until renewed (every 50ms) and the renewal's span has ended: the hook records it on
		// the watchdog's goroutine, after Redis already shows the new TTL.
		locktest.Eventually(t, 5*time.Second, "a renewal span", func() bool {
			for _, s := range seen.Ended() {
				if s.Name() == "lock.renew" {
					return true
				}
			}
			return false
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	req.End()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	got := rc.byName()
	for _, name := range []string{"request", "lock.wait", "lock.hold", "work", "lock.renew"} {
		if got[name] == nil {
			t.Fatalf("collector got %v, missing %s", keys(got), name)
		}
	}
	parent := func(child, want string) {
		t.Helper()
		c, p := got[child], got[want]
		if !bytes.Equal(c.GetParentSpanId(), p.GetSpanId()) || !bytes.Equal(c.GetTraceId(), p.GetTraceId()) {
			t.Errorf("%s parent %x, want %s %x", child, c.GetParentSpanId(), want, p.GetSpanId())
		}
	}
	parent("lock.wait", "request")
	parent("lock.hold", "request")
	parent("work", "lock.hold")
	parent("lock.renew", "lock.hold")
	hold := got["lock.hold"]
	if l := hold.GetLinks(); len(l) != 1 || !bytes.Equal(l[0].GetSpanId(), got["lock.wait"].GetSpanId()) {
		t.Errorf("lock.hold links %v, want lock.wait", l)
	}
	if hold.GetKind() != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("lock.hold kind %v", hold.GetKind())
	}
	if s := rc.scope[hex.EncodeToString(hold.GetSpanId())]; s != lockotel.ScopeName {
		t.Errorf("lock.hold scope %q", s)
	}
	for _, kv := range hold.GetAttributes() {
		if kv.GetKey() == "lockkit.lock.name" && kv.GetValue().GetStringValue() != "export" {
			t.Errorf("lock.hold name %v", kv.GetValue())
		}
	}
}

func keys(m map[string]*tracepb.Span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
