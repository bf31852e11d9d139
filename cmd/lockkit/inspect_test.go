package main_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// inspect of a free name whose namesake in a namespace is held (httpmw's KeyLock holds @http/42
// for the key 42) answers "held no", exit 3, and hints the namesake on stderr (#37: it said only
// "held no"). A name in a namespace whose own name merely ends the same way (@x/a/42 for 42) is
// no namesake.
func TestInspect_hintsTheNamespacedNamesake(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	ctx := context.Background()
	c := locktest.NewClient(t, srv.Client(t))
	acquire(t, c, ctx, "42", core.InNamespace("http"))                  // httpmw KeyLock's key 42
	acquire(t, c, ctx, "7", core.InNamespace("asynq"), core.Permits(2)) // asynqlock WithLimit
	acquire(t, c, ctx, "a/42", core.InNamespace("x"))                   // @x/a/42: the name a/42
	s := newSession(t, bin, "REDIS_URL=redis://"+srv.Addr())
	for _, tc := range []struct {
		name, hint string // hint: the namesakes stderr names, "" for none
		code       int
	}{
		{"42", "@http/42", 3},
		{"7", "@asynq/7", 3},
		{"4", "", 3},
		{"a/42", "@x/a/42", 3},
		{"@http/42", "", 0},
	} {
		out, stderr, code := s.run3("", "inspect", tc.name)
		want := ""
		if tc.hint != "" {
			want = "lockkit inspect: " + tc.name + " is free; did you mean " + tc.hint + "? (held in a namespace: lockkit inspect " + tc.hint + ")\n"
		}
		if code != tc.code || stderr != want || heldYes.MatchString(out) != (tc.code == 0) {
			t.Errorf("lockkit inspect %s: exit %d (want %d), stderr %q, want %q; stdout:\n%s", tc.name, code, tc.code, stderr, want, out)
		}
	}
	if out, stderr, code := s.run3("", "inspect", "--json", "42"); code != 3 || !strings.Contains(out, `"held":false`) || !strings.Contains(stderr, "did you mean @http/42?") {
		t.Errorf("lockkit inspect --json 42: exit %d, stderr %q:\n%s", code, stderr, out)
	}
}
