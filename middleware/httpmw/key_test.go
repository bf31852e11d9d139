package httpmw

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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

func TestNames_scopeAndHashing(t *testing.T) {
	m := &idempotency{o: &options{prefix: "lockkit:idem:"}}
	req := func(method, target, auth string) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return r
	}
	g, name := m.names(req("POST", "/orders", "Bearer a"), "k")
	if g != "lockkit:idem:{"+name+"}" || len(name) != len(lockPrefix)+64 || !strings.HasPrefix(name, lockPrefix) {
		t.Fatalf("guard %q name %q", g, name)
	}
	seen := map[string]string{name: "base"}
	for what, r := range map[string]*http.Request{
		"method":     req("PATCH", "/orders", "Bearer a"),
		"path":       req("POST", "/orders/1", "Bearer a"),
		"credential": req("POST", "/orders", "Bearer b"),
		"anonymous":  req("POST", "/orders", ""),
	} {
		_, n := m.names(r, "k")
		if prev, dup := seen[n]; dup {
			t.Errorf("%s shares a scope with %s", what, prev)
		}
		seen[n] = what
	}
	if _, n := m.names(req("POST", "/orders", "Bearer a"), "k2"); seen[n] != "" {
		t.Error("another key has the same name")
	}
	r := req("POST", "/orders/1", "Bearer a")
	r.Pattern = "POST /orders/{id}"
	_, n1 := m.names(r, "k")
	r2 := req("POST", "/orders/2", "Bearer a")
	r2.Pattern = "POST /orders/{id}"
	if _, n2 := m.names(r2, "k"); n1 != n2 {
		t.Error("the route pattern, not the path, scopes keys inside a ServeMux")
	}
}
