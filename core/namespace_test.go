package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

func TestInNamespace_confinesNames(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	// A client-supplied name that looks like another component's lock stays in its namespace.
	job, err := c.TryAcquire(ctx, "cron/billing", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Release(ctx)
	l, err := c.TryAcquire(ctx, "cron/billing", time.Second, core.InNamespace("http"))
	if err != nil {
		t.Fatalf("namespaced lock blocked by the plain one: %v", err)
	}
	if l.Name() != "@http/cron/billing" || l.Key() != locktest.Key("@http/cron/billing") ||
		l.Name() != core.Namespaced("http", "cron/billing") {
		t.Fatalf("name %q key %q", l.Name(), l.Key())
	}
	// A guard carrying the namespaced hash tag is accepted, the plain one is not.
	if _, err := c.TryAcquire(ctx, "g", time.Second, core.InNamespace("http"), core.WithGuard("lockkit:done:{g}")); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("guard outside the namespaced tag: %v", err)
	}
	g, err := c.TryAcquire(ctx, "g", time.Second, core.InNamespace("http"), core.WithGuard("lockkit:done:{@http/g}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.ReleaseSet(ctx, "lockkit:done:{@http/g}", []byte("x"), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Reserved names and bad namespaces are refused before anything is sent.
	for _, tc := range []struct {
		name string
		opts []core.AcquireOption
	}{
		{"@http/cron/billing", nil},
		{"@", nil},
		{"x", []core.AcquireOption{core.InNamespace("")}},
		{"x", []core.AcquireOption{core.InNamespace("HTTP")}},
		{"x", []core.AcquireOption{core.InNamespace("a/b")}},
		{"x", []core.AcquireOption{core.InNamespace("a b")}},
		{"x", []core.AcquireOption{core.InNamespace(strings.Repeat("a", 65))}},
		{"", []core.AcquireOption{core.InNamespace("http")}},
		{strings.Repeat("k", 1025), []core.AcquireOption{core.InNamespace("http")}},
	} {
		if _, err := c.TryAcquire(ctx, tc.name, time.Second, tc.opts...); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("name %q with %d options: %v, want ErrInvalid", tc.name, len(tc.opts), err)
		}
	}
	// The namespaced lock stays as its release left it (free, with its fence); nothing else was written.
	if st := lockState(t, rdb, locktest.Key("@http/cron/billing")); st.Held() || st.Fence != l.Fence() {
		t.Fatalf("reserved lock written after its release: %+v", st)
	}
	if n := rdb.Exists(ctx, locktest.Key("@")).Val(); n != 0 {
		t.Fatalf("%d reserved keys written", n)
	}
}

// namespaceOf returns the namespace of a full lock name and the name inside it.
func namespaceOf(full string) (ns, name string, ok bool) {
	if !strings.HasPrefix(full, "@") {
		return "", full, false
	}
	return strings.Cut(full[1:], "/")
}

// FuzzInNamespace takes hostile names into a namespace through a real Redis: every accepted name
// lands in its namespace, keeps its bytes, and its key carries the namespaced hash tag; a name
// without a namespace never reaches one.
func FuzzInNamespace(f *testing.F) {
	for _, s := range []string{"42", "cron/billing", "cron%2Fbilling", "@cron/billing", "../cron/x", "}x", "{x}",
		"@grpc/", "\x00@", "/", "@", "a\r\nb", strings.Repeat("/", 1024)} {
		f.Add("http", s)
		f.Add("cron", s)
	}
	f.Add("a-b", "x")
	f.Add("HTTP", "x")
	f.Add("a/b", "x")
	f.Add("", "x")
	_, _, c := setup(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, ns, name string) {
		l, err := c.TryAcquire(ctx, name, time.Second, core.InNamespace(ns))
		valid := ns != "" && len(ns) <= 64 && strings.Trim(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") == "" &&
			name != "" && len(name) <= 1024
		if !valid {
			if !errors.Is(err, core.ErrInvalid) {
				t.Fatalf("ns %q name %q accepted: %v", ns, name, err)
			}
			return
		}
		if err != nil && !errors.Is(err, core.ErrNotAcquired) {
			t.Fatalf("ns %q name %q: %v", ns, name, err)
		}
		if err == nil {
			gotNS, gotName, ok := namespaceOf(l.Name())
			if !ok || gotNS != ns || gotName != name || l.Key() != "lockkit:{@"+ns+"/"+name+"}" {
				t.Fatalf("ns %q name %q: lock %q key %q", ns, name, l.Name(), l.Key())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Without a namespace, the full name is refused: no input reaches a namespace directly.
		if _, err := c.TryAcquire(ctx, core.Namespaced(ns, name), time.Second); !errors.Is(err, core.ErrInvalid) {
			t.Fatalf("plain name %q accepted: %v", core.Namespaced(ns, name), err)
		}
		// Two (namespace, name) pairs give the same lock only if they are the same pair.
		for _, other := range [][2]string{{ns + "x", name}, {ns, name + "x"}, {ns + "-", strings.TrimPrefix(name, "-")}} {
			if core.Namespaced(other[0], other[1]) == core.Namespaced(ns, name) {
				t.Fatalf("%q and %q collide", other, [2]string{ns, name})
			}
		}
	})
}
