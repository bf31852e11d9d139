package adapter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/adapter"
)

type in struct{ key string }

// opts returns the options of a test adapter "pkg", with a key from in, after set.
func opts(set ...func(*adapter.KeyOptions[in])) *adapter.KeyOptions[in] {
	o := &adapter.KeyOptions[in]{Options: adapter.New("pkg", 10*time.Second, "ns")}
	o.Key = func(i in) (string, error) { return i.key, nil }
	for _, f := range set {
		if f != nil {
			f(o)
		}
	}
	return o
}

// The contract's one validation: every shared option is checked with one wording, errors are
// "lockkit: PKG: WHAT" matching core.ErrInvalid and the package's sentinel, "lockkit" once; an
// option of another constructor is refused.
func TestValidate(t *testing.T) {
	keys := func(in) ([]string, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		set  func(*adapter.KeyOptions[in])
		want string // "" = valid
	}{
		{"defaults", nil, ""},
		{"ttl min", func(o *adapter.KeyOptions[in]) { o.SetTTL(core.MinTTL) }, ""},
		{"ttl max", func(o *adapter.KeyOptions[in]) { o.SetTTL(core.MaxTTL) }, ""},
		{"ttl low", func(o *adapter.KeyOptions[in]) { o.SetTTL(core.MinTTL - 1) },
			"WithTTL(9.999999ms) is outside [10ms, 24h0m0s]"},
		{"ttl high", func(o *adapter.KeyOptions[in]) { o.SetTTL(core.MaxTTL + time.Second) },
			"WithTTL(24h0m1s) is outside [10ms, 24h0m0s]"},
		{"wait 0", func(o *adapter.KeyOptions[in]) { o.SetWait(0) }, ""},
		{"wait negative", func(o *adapter.KeyOptions[in]) { o.SetWait(-time.Second) }, "WithWait(-1s) is negative"},
		{"namespace", func(o *adapter.KeyOptions[in]) { o.SetNamespace("a-1") }, ""},
		{"namespace slash", func(o *adapter.KeyOptions[in]) { o.SetNamespace("a/b") },
			`WithNamespace("a/b") must be 1 to 64 of a-z, 0-9 and '-'`},
		{"limit 1", func(o *adapter.KeyOptions[in]) { o.SetLimit(1) }, ""},
		{"limit max", func(o *adapter.KeyOptions[in]) { o.SetLimit(core.MaxPermits) }, ""},
		{"limit 0", func(o *adapter.KeyOptions[in]) { o.SetLimit(0) }, fmt.Sprintf("WithLimit(0) is outside [1, %d]", core.MaxPermits)},
		{"limit over", func(o *adapter.KeyOptions[in]) { o.SetLimit(core.MaxPermits + 1) },
			fmt.Sprintf("WithLimit(%d) is outside [1, %d]", core.MaxPermits+1, core.MaxPermits)},
		{"logger nil", func(o *adapter.KeyOptions[in]) { o.SetLogger(nil) }, ""},
		{"key nil", func(o *adapter.KeyOptions[in]) { o.SetKey(nil) }, "WithKey(nil)"},
		{"keys nil", func(o *adapter.KeyOptions[in]) { o.SetKeys(nil) }, "WithKeys(nil)"},
		{"keys", func(o *adapter.KeyOptions[in]) { o.Key = nil; o.SetKeys(keys) }, ""},
		{"key and keys", func(o *adapter.KeyOptions[in]) { o.SetKey(o.Key); o.SetKeys(keys) },
			"WithKey and WithKeys cannot be combined: give one"},
		{"keys and limit", func(o *adapter.KeyOptions[in]) { o.SetKeys(keys); o.SetLimit(2) },
			"WithKeys and WithLimit cannot be combined: a set of locks takes no permits"},
		{"no key", func(o *adapter.KeyOptions[in]) { o.Key = nil }, "Ctor has no key: give it a KeyFunc or WithKeys"},
		{"misplaced", func(o *adapter.KeyOptions[in]) { o.Given("WithOther") }, "WithOther does not apply to Ctor"},
		{"allowed", func(o *adapter.KeyOptions[in]) { o.Given("WithMine") }, ""},
	} {
		err := opts(tc.set).Validate("Ctor", "WithOther")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		want := "lockkit: pkg: " + tc.want
		if err == nil || err.Error() != want || !errors.Is(err, core.ErrInvalid) ||
			!errors.Is(err, adapter.Sentinel("pkg")) || errors.Is(err, adapter.Sentinel("other")) {
			t.Errorf("%s: %v, want %q matching core.ErrInvalid and pkg's sentinel only", tc.name, err, want)
		}
	}
}

func TestInvalid_oneShape(t *testing.T) {
	err := adapter.Invalid("cronlock", "nil %s", "core.Client")
	if got := err.Error(); got != "lockkit: cronlock: nil core.Client" || strings.Count(got, "lockkit") != 1 {
		t.Fatalf("error text %q", got)
	}
	s := adapter.Sentinel("cronlock")
	if !errors.Is(err, s) || !errors.Is(err, core.ErrInvalid) || !errors.Is(s, core.ErrInvalid) {
		t.Fatal("Invalid must match core.ErrInvalid and its package's sentinel")
	}
	if s.Error() != "lockkit: cronlock: invalid argument" {
		t.Fatalf("sentinel text %q", s.Error())
	}
	var typed interface{ ErrorType() string }
	if !errors.As(err, &typed) || typed.ErrorType() != "invalid_argument" {
		t.Fatalf("ErrorType through the chain: %v", typed)
	}
}

// Every adapter starts from the same defaults: DefaultWait (0: try once), no limit, the logger
// slog.Default() read when logging.
func TestNew_defaults(t *testing.T) {
	o := adapter.New("pkg", time.Second, "ns")
	if o.Wait != adapter.DefaultWait || adapter.DefaultWait != 0 || o.Limit != 0 || o.Logger != nil {
		t.Fatalf("defaults: %+v", o)
	}
	var buf bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	o.Warn(context.Background(), "release failed", errors.New("boom"), slog.String("job", "j"))
	if got := buf.String(); !strings.Contains(got, `msg="lockkit: pkg: release failed" job=j error=boom`) {
		t.Fatalf("logged %q to slog.Default()", got)
	}
	buf.Reset()
	o.SetLogger(slog.New(slog.DiscardHandler))
	o.Warn(context.Background(), "release failed", nil)
	if buf.Len() != 0 {
		t.Fatalf("a discarding logger logged to slog.Default(): %q", buf.String())
	}
}

func TestKeysOf(t *testing.T) {
	o := opts()
	for _, tc := range []struct {
		key  string
		want string
	}{{"a", "[a]"}, {"", "[]"}} {
		keys, err := o.KeysOf(in{tc.key})
		if err != nil || fmt.Sprint(keys) != tc.want {
			t.Errorf("WithKey %q: %v, %v", tc.key, keys, err)
		}
	}
	o = opts(func(o *adapter.KeyOptions[in]) {
		o.SetKeys(func(i in) ([]string, error) { return strings.Split(i.key, ","), nil })
	})
	for k, want := range map[string]string{
		"a,b":      "[a b]",
		"b,a":      "[b a]",
		"a,,a,b,a": "[a b]",
		",":        "[]",
		"a":        "[a]",
	} {
		keys, err := o.KeysOf(in{k})
		if err != nil || fmt.Sprint(keys) != want {
			t.Errorf("WithKeys %q: %v, %v; want %s", k, keys, err, want)
		}
	}
	boom := errors.New("boom")
	o = opts(func(o *adapter.KeyOptions[in]) { o.SetKeys(func(in) ([]string, error) { return []string{"a"}, boom }) })
	if keys, err := o.KeysOf(in{}); err != boom || keys != nil {
		t.Errorf("error: %v, %v", keys, err)
	}
}

func TestDistinct(t *testing.T) {
	many := make([]string, 0, 60)
	for i := range 30 {
		many = append(many, fmt.Sprint(i), fmt.Sprint(i))
	}
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{nil, "[]"},
		{[]string{"a", "b"}, "[a b]"},
		{[]string{"a", "", "b", "a"}, "[a b]"},
		{many, "[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29]"},
	} {
		before := fmt.Sprint(tc.keys)
		if got := fmt.Sprint(adapter.Distinct(tc.keys)); got != tc.want {
			t.Errorf("Distinct(%v) = %s, want %s", tc.keys, got, tc.want)
		}
		if fmt.Sprint(tc.keys) != before {
			t.Errorf("Distinct modified its argument: %v", tc.keys)
		}
	}
}

func TestJoin(t *testing.T) {
	type keyFunc func(in) (string, error)
	first := keyFunc(func(i in) (string, error) { return i.key + "1", nil })
	second := keyFunc(func(i in) (string, error) { return i.key + "2", nil })
	keys, err := adapter.Join("pkg", []keyFunc{first, second})(in{"k"})
	if err != nil || fmt.Sprint(keys) != "[k1 k2]" {
		t.Fatalf("Join: %v, %v", keys, err)
	}
	defer func() {
		if err, _ := recover().(error); err == nil || err.Error() != "lockkit: pkg: Keys: key function 1 is nil" {
			t.Fatalf("Join with a nil function: panicked with %v", err)
		}
	}()
	adapter.Join("pkg", []keyFunc{first, nil})
}
