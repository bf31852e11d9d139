package httpmw

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/exactlyonce"
	"github.com/redis/go-redis/v9"
)

func TestParseKey(t *testing.T) {
	long := strings.Repeat("a", 255)
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{`"abc"`, "abc", true},
		{`abc`, "abc", true},
		{` 	"abc" `, "abc", true},
		{`8e03978e-40d5-43e8-bc93-6894a57f9324`, "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{`"a b"`, "a b", true},
		{`"a\"b\\c"`, `a"b\c`, true},
		{`"\\"`, `\`, true},
		{`a;b=c`, "a;b=c", true}, // bare: any visible ASCII but '"', '\' and ','
		{long, long, true},
		{`"` + long + `"`, long, true},
		{`"` + strings.Repeat(`\\`, 255) + `"`, strings.Repeat(`\`, 255), true},
		{"", "", false},
		{"  ", "", false},
		{`""`, "", false},
		{`"`, "", false},
		{`"abc`, "", false},
		{`abc"`, "", false},
		{`"a"b"`, "", false},
		{`"a";p=1`, "", false},
		{`"a", "b"`, "", false},
		{`a,b`, "", false},
		{`a b`, "", false},
		{`a\b`, "", false},
		{`"a\b"`, "", false},
		{`"a\`, "", false},
		{"\"a\tb\"", "", false},
		{"\"caf\u00e9\"", "", false},
		{"caf\u00e9", "", false},
		{"a\x00", "", false},
		{long + "a", "", false},
		{`"` + long + `a"`, "", false},
		{`"` + strings.Repeat(`\\`, 256) + `"`, "", false},
	} {
		got, ok := parseKey(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("parseKey(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// quote encodes k as a Structured Field String.
func quote(k string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
}

// FuzzParseKey checks the parser's invariants: an accepted key is 1 to 255 printable ASCII
// characters; quoting it gives the same key back; a bare key is accepted only as itself.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`"abc"`, `abc`, `"a\"b"`, `"a\\b"`, ` "x" `, `""`, `"`, `"a\`, `a,b`,
		`"a";p`, "\"\x7f\"", strings.Repeat("k", 256), `"` + strings.Repeat("k", 255) + `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, ok := parseKey(in)
		if !ok {
			if k != "" {
				t.Fatalf("rejected %q but returned %q", in, k)
			}
			return
		}
		if len(k) < 1 || len(k) > maxKeyLen {
			t.Fatalf("parseKey(%q) = %q: length %d", in, k, len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Fatalf("parseKey(%q) = %q: byte %#x", in, k, k[i])
			}
		}
		if k2, ok := parseKey(quote(k)); !ok || k2 != k {
			t.Fatalf("quoted %q parses to %q, %v", quote(k), k2, ok)
		}
		if trimmed := strings.Trim(in, " \t"); trimmed[0] != '"' && k != trimmed {
			t.Fatalf("bare %q parsed as %q", in, k)
		}
	})
}

// testIdempotency returns an idempotency middleware over a client that never connects.
func testIdempotency(t testing.TB, opts ...IdempotencyOption) *idempotency {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	locks, err := core.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	return Idempotency(locks, opts...)(http.NotFoundHandler()).(*idempotency)
}

func TestNames_scopeAndHashing(t *testing.T) {
	m := testIdempotency(t)
	req := func(method, target, auth string) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return r
	}
	k := m.scope(req("POST", "/orders", "Bearer a"), "k")
	name := strings.TrimPrefix(k.Lock(), "@http-idem/")
	if k.Record() != "lockkit:idem:{"+k.Lock()+"}" || len(name) != 64 {
		t.Fatalf("record %q lock %q", k.Record(), k.Lock())
	}
	seen := map[string]string{k.Lock(): "base"}
	cookie := req("POST", "/orders", "Bearer a")
	cookie.Header.Set("Cookie", "session=alice")
	cookie2 := req("POST", "/orders", "Bearer a")
	cookie2.Header.Set("Cookie", "session=mallory")
	cert := req("POST", "/orders", "Bearer a")
	cert.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Raw: []byte("alice's certificate")}}}
	cert2 := req("POST", "/orders", "Bearer a")
	cert2.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Raw: []byte("mallory's certificate")}}}
	twoAuth := req("POST", "/orders", "Bearer a")
	twoAuth.Header.Add("Authorization", "Bearer b")
	for what, r := range map[string]*http.Request{
		"method":            req("PATCH", "/orders", "Bearer a"),
		"path":              req("POST", "/orders/1", "Bearer a"),
		"credential":        req("POST", "/orders", "Bearer b"),
		"anonymous":         req("POST", "/orders", ""),
		"cookie":            cookie,
		"another cookie":    cookie2,
		"certificate":       cert,
		"another cert":      cert2,
		"two Authorization": twoAuth,
	} {
		n := m.scope(r, "k").Lock()
		if prev, dup := seen[n]; dup {
			t.Errorf("%s shares a scope with %s", what, prev)
		}
		seen[n] = what
	}
	if n := m.scope(req("POST", "/orders", "Bearer a"), "k2").Lock(); seen[n] != "" {
		t.Error("another key has the same name")
	}
	r := req("POST", "/orders/1", "Bearer a")
	r.Pattern = "POST /orders/{id}"
	n1 := m.scope(r, "k").Lock()
	r2 := req("POST", "/orders/2", "Bearer a")
	r2.Pattern = "POST /orders/{id}"
	if n2 := m.scope(r2, "k").Lock(); n1 != n2 {
		t.Error("the route pattern, not the path, scopes keys inside a ServeMux")
	}
	// A principal scope keeps method and route: it adds to them, and replaces the credentials.
	p := testIdempotency(t, WithScope(func(r *http.Request) string { return r.Header.Get("X-User") }))
	a := req("POST", "/orders", "Bearer old")
	a.Header.Set("X-User", "u1")
	b := req("POST", "/orders", "Bearer refreshed")
	b.Header.Set("X-User", "u1")
	c := req("PATCH", "/orders", "Bearer old")
	c.Header.Set("X-User", "u1")
	d := req("POST", "/orders", "Bearer old")
	d.Header.Set("X-User", "u2")
	if p.scope(a, "k") != p.scope(b, "k") {
		t.Error("a principal scope must survive a token refresh")
	}
	if p.scope(a, "k") == p.scope(c, "k") || p.scope(a, "k") == p.scope(d, "k") {
		t.Error("a principal scope replaced the method, or ignored the principal")
	}
}

// FuzzScope feeds hostile routes, credentials and keys to the scope of Idempotency: every name stays
// in the "http-idem" namespace, and moving bytes between the route, the credentials and the key, or
// changing any of them, never gives another request's name.
func FuzzScope(f *testing.F) {
	f.Add("POST /orders/{id}", "Bearer a", "session=x", "k")
	f.Add("POST /orders", "/{id}", "", "k")
	f.Add("", "", "", "@cron/billing")
	f.Add("POST /x", "Bearer a\x00", "\x00", "cron%2Fbilling")
	f.Add("}", "{", "@http/", "../@grpc-idem/x")
	m := testIdempotency(f)
	f.Fuzz(func(t *testing.T, route, auth, cookie, key string) {
		req := func(route, auth, cookie string) *http.Request {
			r := httptest.NewRequest("POST", "/", nil)
			r.Pattern = route
			if auth != "" {
				r.Header.Set("Authorization", auth)
			}
			if cookie != "" {
				r.Header.Set("Cookie", cookie)
			}
			return r
		}
		k := m.scope(req(route, auth, cookie), key)
		if !strings.HasPrefix(k.Lock(), "@http-idem/") || len(k.Lock()) != len("@http-idem/")+64 ||
			k.Record() != "lockkit:idem:{"+k.Lock()+"}" {
			t.Fatalf("lock %q record %q", k.Lock(), k.Record())
		}
		others := []exactlyonce.Key{
			m.scope(req(route+key, auth, cookie), ""),
			m.scope(req(route, auth+cookie, ""), key),
			m.scope(req(route, auth, cookie+key), ""),
			m.scope(req(route+"x", auth, cookie), key),
			m.scope(req(route, auth, cookie), key+"x"),
			m.scope(req(route, cookie, auth), key),
		}
		for i, o := range others {
			same := (i == 0 && key == "") || (i == 1 && cookie == "") || (i == 2 && key == "") ||
				(i == 5 && auth == cookie)
			if !same && o == k {
				t.Fatalf("variant %d collides with route %q auth %q cookie %q key %q", i, route, auth, cookie, key)
			}
		}
	})
}
