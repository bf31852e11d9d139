package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// demoRun runs the demo in-process with args and an environment that has only env, and returns
// its exit code and output.
func demoRun(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, func(k string) string { return env[k] }, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// wantSummary checks that the summary table lists every scene of the run as passed.
func wantSummary(t *testing.T, out string, scenesRun ...int) {
	t.Helper()
	for _, n := range scenesRun {
		row := scenes[n-1].short
		found := false
		for line := range strings.SplitSeq(out, "\n") {
			if strings.Contains(line, row) && strings.Contains(line, "PASS") {
				found = true
			}
		}
		if !found {
			t.Errorf("summary has no PASS row for scene %d (%s)", n, row)
		}
	}
	if !strings.Contains(out, "scenes passed in") && !strings.Contains(out, "scene passed in") {
		t.Errorf("summary does not say that all scenes passed")
	}
}

// TestDemo runs the whole tour against a real redis-server (quietly) and against the embedded
// server (with the story and the span trees), in parallel.
func TestDemo(t *testing.T) {
	var all []int // every scene
	seen := map[string]bool{}
	for n, sc := range scenes {
		all = append(all, n+1)
		if seen[sc.title] || seen[sc.short] {
			t.Errorf("scene %d (%q) is listed twice", n+1, sc.short)
		}
		seen[sc.title], seen[sc.short] = true, true
	}
	first, last := fmt.Sprintf("[1/%d]", len(all)), fmt.Sprintf("[%d/%d]", len(all), len(all))
	t.Run("real-redis", func(t *testing.T) {
		srv := redistest.Start(t)
		t.Parallel()
		code, out, errOut := demoRun(t, nil, "-quiet", "-redis", srv.Addr())
		if code != exitOK {
			t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		wantSummary(t, out, all...)
		if strings.Contains(out, first) {
			t.Errorf("-quiet printed the scenes:\n%s", out)
		}
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := demoRun(t, nil, "-trace")
		if code != exitOK {
			t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		wantSummary(t, out, all...)
		for _, want := range []string{"embedded Redis", first, last, "Idempotent-Replayed: true",
			"409 Conflict", "422 Unprocessable Entity", "lock.wait", "lock.hold demo fence=", "lost reason=not_owner"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestDemo_otlp runs scene 2 with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a fake collector and
// checks that the lock spans arrive, from service lockkit-demo.
func TestDemo_otlp(t *testing.T) {
	srv := redistest.Start(t)
	var (
		mu    sync.Mutex
		names = map[string]int{}
		svc   []string
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(b, req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					svc = append(svc, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names[s.Name]++
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL) // read by the exporter itself
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}
	code, out, errOut := demoRun(t, env, "-scene", "2", "-redis", srv.Addr())
	if code != exitOK {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	wantSummary(t, out, 2)
	mu.Lock()
	defer mu.Unlock()
	if names["lock.wait"] != 2 || names["lock.hold"] != 2 || names["lock.renew"] < 4 {
		t.Errorf("exported spans %v, want 2 lock.wait, 2 lock.hold, 4+ lock.renew", names)
	}
	for _, s := range svc {
		if s != serviceName {
			t.Errorf("service.name %q, want %q", s, serviceName)
		}
	}
	if len(svc) == 0 {
		t.Errorf("no resource with service.name exported")
	}
}

// TestRun_usage checks that bad flags exit with status 2 before anything runs.
func TestRun_usage(t *testing.T) {
	for _, args := range [][]string{{"-scene", fmt.Sprint(len(scenes) + 1)}, {"-scene", "-1"}, {"extra"}, {"-nope"}} {
		code, out, _ := demoRun(t, nil, args...)
		if code != exitUsage || out != "" {
			t.Errorf("args %q: exit code %d, stdout %q; want %d and no output", args, code, out, exitUsage)
		}
	}
}

// TestScenes_nameTheirCode checks that each scene's "read:" line names a file that holds the
// scene's function.
func TestScenes_nameTheirCode(t *testing.T) {
	for n, sc := range scenes {
		file, fn, ok := strings.Cut(sc.read, ", func ")
		if !ok {
			t.Errorf("scene %d: read %q is not \"FILE, func NAME\"", n+1, sc.read)
			continue
		}
		src, err := os.ReadFile(filepath.Join("..", "..", file))
		if err != nil {
			t.Errorf("scene %d: %v", n+1, err)
			continue
		}
		if !strings.Contains(string(src), "\nfunc "+fn+"(") {
			t.Errorf("scene %d: %s has no func %s", n+1, file, fn)
		}
	}
}

// What a scene's lock clients log is a line of the scene's story, not a stray line on stderr
// (#47: scene 2 printed "WARN lockkit: lock lost name=lost-demo reason=not_owner" in the middle of
// its timeline, through slog.Default).
func TestDemo_clientLogsInTheStory(t *testing.T) {
	var stray bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&stray, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	code, out, errOut := demoRun(t, nil, "-scene", "2")
	if code != exitOK {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if stray.Len() > 0 || errOut != "" {
		t.Errorf("the scene logged outside its story:\n%s%s", stray.String(), errOut)
	}
	if !regexp.MustCompile(`(?m)^ +log: level=WARN msg="lockkit: lock lost" name=lost-demo reason=not_owner$`).MatchString(out) {
		t.Errorf("the lost lock's log line is not in the story:\n%s", out)
	}
}
