package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/redistest"
)

// --json prints JSON Lines, as the help says: each line one JSON object, as many as the help
// promises (ls: one per name, none when nothing matches; inspect, release, idem: one; watch: one
// per event).
func TestJSON_lines(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	fx := newDocFixture(t, singleTarget(srv))
	s := newSession(t, bin, "REDIS_URL=redis://"+srv.Addr())
	if out, _ := s.run("", "help"); !strings.Contains(out, "print JSON Lines: one JSON object per line (ls: one per lock or semaphore") {
		t.Fatalf("lockkit help does not say what --json prints:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		code int
		n    int    // objects; -1: at least one
		key  string // a key every object has
	}{
		{[]string{"ls", "--json"}, 0, len(fx.names), "name"},
		{[]string{"ls", "--json", "nothing:*"}, 0, 0, ""},
		{[]string{"inspect", "--json", "invoice:42"}, 0, 1, "holders"},
		{[]string{"inspect", "--json", "free"}, 3, 1, "holders"},
		{[]string{"idem", "--json", "http-idem", fx.idemHash}, 0, 1, "status"},
		{[]string{"idem", "--json", "http-idem", "none"}, 3, 1, "status"},
		{[]string{"release", "--json", "--force", "--yes", "@http/tenant-7"}, 0, 1, "was"},
		{[]string{"release", "--json", "--force", "--yes", "free"}, 3, 1, "released"},
		{[]string{"watch", "--json", "--for", "300ms", "invoice:42"}, 0, -1, "event"},
	} {
		out, code := s.run("", tc.args...)
		var objs []map[string]any
		if out != "" && !strings.HasSuffix(out, "\n") {
			t.Errorf("lockkit %v: the last line does not end", tc.args)
		}
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			var o map[string]any
			if err := json.Unmarshal([]byte(line), &o); err != nil && out != "" {
				t.Errorf("lockkit %v: a line that is not a JSON object: %v: %q", tc.args, err, line)
			} else if o != nil {
				objs = append(objs, o)
			}
		}
		if code != tc.code || (tc.n >= 0 && len(objs) != tc.n) || (tc.n < 0 && len(objs) == 0) {
			t.Errorf("lockkit %v: exit %d (want %d), %d objects (want %d):\n%s", tc.args, code, tc.code, len(objs), tc.n, out)
		}
		for _, o := range objs {
			if _, ok := o[tc.key]; !ok {
				t.Errorf("lockkit %v: an object without %q: %v", tc.args, tc.key, o)
			}
		}
	}
}
