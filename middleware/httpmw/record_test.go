package httpmw

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/exactlyonce"
)

func TestRecord_roundTrip(t *testing.T) {
	h := http.Header{
		"Content-Type":      {"application/json"},
		"Location":          {"/orders/1"},
		"Link":              {"</a>; rel=a", "</b>; rel=b"},
		"x-raw":             {"as set"},
		"Set-Cookie":        {"session=secret"},
		"Date":              {"Mon, 01 Jan 2024 00:00:00 GMT"},
		"Connection":        {"close"},
		"Trailer:X-Sum":     {"1"},
		"Transfer-Encoding": {"chunked"},
		"Content-Length":    {"12"},
	}
	b := appendRecordHead(nil, 201, h)
	var fp [32]byte
	copy(fp[:], strings.Repeat("f", 32))
	exactlyonce.SetFingerprint(b, fp)
	b = append(b, `{"id":1}`...)
	env, err := exactlyonce.Decode(string(b))
	if err != nil || env.Fingerprint != fp {
		t.Fatalf("envelope %+v: %v", env, err)
	}
	rec, ok := parseRecord(&env)
	if !ok || rec.status != 201 || rec.body != `{"id":1}` {
		t.Fatalf("parsed %+v, %v", rec, ok)
	}
	got := http.Header{"Location": {"/elsewhere"}, "X-Outer": {"kept"}}
	rec.setHeaders(got)
	want := http.Header{
		"Content-Type":   {"application/json"},
		"Location":       {"/orders/1"},
		"Link":           {"</a>; rel=a", "</b>; rel=b"},
		"x-raw":          {"as set"},
		"Content-Length": {"12"},
		"X-Outer":        {"kept"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	// Every truncation is rejected, never misread.
	for i := range len(b) - len(`{"id":1}`) {
		if env, err := exactlyonce.Decode(string(b[:i])); err == nil {
			if _, ok := parseRecord(&env); ok {
				t.Fatalf("truncated record (%d of %d bytes) accepted", i, len(b))
			}
			continue
		}
		if i >= exactlyonce.HeadLen {
			t.Fatalf("truncated record (%d of %d bytes) accepted", i, len(b))
		}
	}
}

// FuzzParseRecord checks that any stored value is either rejected or read consistently, without
// panicking.
func FuzzParseRecord(f *testing.F) {
	b := appendRecordHead(nil, 200, http.Header{"A": {"1", "2"}, "B": {""}})
	f.Add(string(append(b, "body"...)))
	f.Add(string(appendRecordHead(nil, 204, nil)))
	f.Add("\x01")
	f.Add("\x02" + strings.Repeat("\x00", 40))
	f.Fuzz(func(t *testing.T, s string) {
		env, err := exactlyonce.Decode(s)
		if err != nil {
			return
		}
		rec, ok := parseRecord(&env)
		if !ok {
			return
		}
		if rec.status < 100 || rec.status > 999 || !strings.HasSuffix(s, rec.body) {
			t.Fatalf("inconsistent record %+v", rec)
		}
		h := http.Header{}
		rec.setHeaders(h)
	})
}
