package httpmw_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { locktest.VerifyTestMain(m) }

// setup starts a fresh redis-server and returns it with a lockkit client.
func setup(t testing.TB) (*redistest.Server, *core.Client) {
	t.Helper()
	srv := redistest.Start(t)
	return srv, locktest.NewClient(t, srv.Client(t))
}

// downClient returns a client for srv that gives up at once when srv is down.
func downClient(t testing.TB, srv *redistest.Server) *redis.Client {
	o := srv.Options()
	o.MaxRetries = -1
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// serve starts an HTTP server for h, closed when the test ends.
func serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// response is what a test request got.
type response struct {
	status int
	header http.Header
	body   string
}

// send makes a request and reads the whole response. Headers come in pairs (name, value).
func send(t testing.TB, method, url, key, body string, headers ...string) response {
	t.Helper()
	r, err := request(method, url, key, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// request is send for other goroutines: it returns errors instead of failing the test.
func request(method, url, key, body string, headers ...string) (response, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: string(b)}, err
}

// roundTrips returns the Lua calls Redis has run since the last ResetStats.
func roundTrips(t testing.TB, srv *redistest.Server) int64 {
	t.Helper()
	st := srv.CommandStats(t)
	return st["evalsha"] + st["eval"]
}

// wantProblem checks that res is an RFC 9457 problem of the given status and type slug.
func wantProblem(t testing.TB, res response, status int, slug string) {
	t.Helper()
	if res.status != status {
		t.Fatalf("status %d, want %d (body %s)", res.status, status, res.body)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(res.body), &p); err != nil {
		t.Fatalf("problem body %q: %v", res.body, err)
	}
	if !strings.HasSuffix(p.Type, "/problems.md#"+slug) || p.Status != status || p.Title == "" {
		t.Fatalf("problem %+v, want type #%s and status %d", p, slug, status)
	}
}

// logBuffer collects log lines written from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }
