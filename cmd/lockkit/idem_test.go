package main_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// idem finds httpmw's record from the client's key and the request it came with (method, route,
// credentials or WithScope's principal), and still from the record's hash (#37: "lockkit idem
// http-idem KEY" answered "status none" for a stored record); its TTL and age are durations as
// the other commands write them (it wrote "ttl 86396663ms").
func TestIdem_findsHttpmwsRecordFromTheRequest(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := locktest.NewClient(t, rdb)
	created := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}", httpmw.Idempotency(c)(created))
	mux.Handle("POST /carts", httpmw.Idempotency(c, httpmw.WithScope(func(r *http.Request) string {
		return r.Header.Get("X-User")
	}))(created))
	post := func(target, key string, header ...string) {
		r := httptest.NewRequest(http.MethodPost, target, strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", key)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Add(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", target, w.Code, w.Body)
		}
	}
	post("/orders/1", "k-1", "Authorization", "Bearer alice", "Cookie", "session=1")
	post("/orders/1", "k-2")
	post("/carts", "k-3", "X-User", "u1", "Authorization", "Bearer any")
	hashes, err := rdb.Keys(context.Background(), "lockkit:idem:{@http-idem/*}").Result()
	if err != nil || len(hashes) != 3 {
		t.Fatalf("stored records: %q %v", hashes, err)
	}
	hash := strings.TrimSuffix(strings.TrimPrefix(hashes[0], "lockkit:idem:{@http-idem/"), "}")

	s := newSession(t, bin, "REDIS_URL=redis://"+srv.Addr())
	route := []string{"--method", "POST", "--route", "POST /orders/{id}"}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{append([]string{"idem", "http-idem", "k-1", "--header", "Authorization: Bearer alice", "--header", "Cookie: session=1"}, route...), 0},
		{append([]string{"idem", "http-idem", "k-1", "--header", "Authorization: Bearer alice"}, route...), 3}, // not the caller's cookie
		{append([]string{"idem", "http-idem", "k-1"}, route...), 3},                                            // anonymous
		{append([]string{"idem", "http-idem", "k-2"}, route...), 0},
		{[]string{"idem", "http-idem", "k-2", "--method", "POST", "--route", "/orders/1"}, 3}, // the path, not the pattern
		{[]string{"idem", "http-idem", "k-3", "--method", "POST", "--route", "POST /carts", "--principal", "u1"}, 0},
		{[]string{"idem", "http-idem", "k-3", "--method", "POST", "--route", "POST /carts", "--principal", "u2"}, 3},
		{[]string{"idem", "http-idem", hash}, 0}, // the hash, as before
		{[]string{"idem", "-o", "json", "http-idem", "k-2", "--method", "POST", "--route", "POST /orders/{id}"}, 0},
		{[]string{"idem", "http-idem", "k-2", "--method", "POST"}, 2},
		{[]string{"idem", "grpc-idem", "k-2", "--method", "POST", "--route", "/x"}, 2},
		{[]string{"idem", "http-idem", "k-3", "--method", "POST", "--route", "POST /carts", "--principal", "u1", "--header", "A: b"}, 2},
	} {
		out, stderr, code := s.run3("", tc.args...)
		if code != tc.code {
			t.Errorf("lockkit %q: exit %d, want %d:\n%s%s", tc.args, code, tc.code, out, stderr)
		}
		stored := regexp.MustCompile(`(?m)^status\s+stored$`).MatchString(out) || strings.Contains(out, `"status":"stored"`)
		if stored != (tc.code == 0) {
			t.Errorf("lockkit %q: stored %v, want %v:\n%s", tc.args, stored, tc.code == 0, out)
		}
		if tc.code == 0 && !strings.Contains(tc.args[1], "json") && !strings.HasPrefix(tc.args[1], "-") {
			// 24 h retention: the TTL is about 24h, the age a few milliseconds or seconds.
			if !regexp.MustCompile(`(?m)^ttl\s+2[34]h\d+m\d+(\.\d{1,3})?s$`).MatchString(out) ||
				!regexp.MustCompile(`(?m)^age\s+\d+(\.\d{1,3})?(ms|s) \(retention − TTL\)$`).MatchString(out) {
				t.Errorf("lockkit %q: ttl and age not written as durations:\n%s", tc.args, out)
			}
		}
	}
}
