package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// ls, inspect and watch show a name's mode and every holder with its mode and fence, the same in
// all three, in text and in JSON: a lock, two reads, a write, two permits (#36 item 2).
func TestModes_sameInLsInspectWatch(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	holds := map[string][]*core.Lock{}
	take := func(c *core.Client, name string, opts ...core.AcquireOption) {
		holds[name] = append(holds[name], acquire(t, c, ctx, name, opts...))
	}
	take(a, "m-lock")
	take(a, "m-read", core.Read())
	take(b, "m-read", core.Read())
	take(a, "m-write", core.Write())
	take(a, "m-permit", core.Permits(3))
	take(b, "m-permit", core.Permits(3))
	s := newSession(t, bin, "REDIS_URL=redis://"+srv.Addr())
	for name, locks := range holds {
		mode := strings.TrimPrefix(name, "m-")
		text := mode
		if mode == "permit" {
			text = "permit/3"
		}
		var want []string // "MODE FENCE", the text's mode
		for _, l := range locks {
			want = append(want, fmt.Sprintf("%s %d", text, l.Fence()))
		}
		slices.Sort(want)
		check := func(what string, got []string) {
			t.Helper()
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s %s: holders %q, want %q", what, name, got, want)
			}
		}
		// JSON: the name's mode, and each holder's mode and fence.
		for _, cmd := range []string{"ls", "inspect"} {
			out, code := s.run("", cmd, "--json", name)
			var v shown
			if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
				t.Fatalf("lockkit %s --json %s: exit %d, %v:\n%s", cmd, name, code, err, out)
			}
			var got []string
			for _, h := range v.Holders {
				got = append(got, fmt.Sprintf("%s %d", strings.Replace(h.Mode, "permit", "permit/3", 1), h.Fence))
			}
			check(cmd+" --json", got)
			if v.Mode != mode {
				t.Errorf("%s --json %s: mode %q, want %q", cmd, name, v.Mode, mode)
			}
		}
		out, _ := s.run("", "watch", "--json", "--for", "300ms", name)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var ev struct {
				Event, Mode string
				Fence       int64
				Holder      struct {
					Mode  string
					Fence int64
				}
			}
			if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Event != "state" || ev.Mode != ev.Holder.Mode || ev.Fence != ev.Holder.Fence {
				t.Errorf("watch --json %s: %v: %s", name, err, l)
			}
			got = append(got, fmt.Sprintf("%s %d", strings.Replace(ev.Holder.Mode, "permit", "permit/3", 1), ev.Holder.Fence))
		}
		check("watch --json", got)

		// Text: ls's MODE and FENCE columns, inspect's holders, watch's state lines.
		out, _ = s.run("", "ls", name)
		got = nil
		for _, row := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			cols := columns.Split(row, -1)
			got = append(got, cols[1]+" "+cols[5])
		}
		check("ls", got)
		out, _ = s.run("", "inspect", name)
		if !regexp.MustCompile(`(?m)^mode\s+` + text + `$`).MatchString(out) {
			t.Errorf("inspect %s: no line mode %s:\n%s", name, text, out)
		}
		got = nil
		for _, m := range regexp.MustCompile(`(?m)^holder\s+\S+\n  mode\s+(\S+)\n(?:  .*\n)*?  fence\s+(\d+)$`).FindAllStringSubmatch(out, -1) {
			got = append(got, m[1]+" "+m[2])
		}
		check("inspect", got)
		out, _ = s.run("", "watch", "--for", "300ms", name)
		got = nil
		for _, m := range regexp.MustCompile(`(?m) state mode=(\S+) fence=(\d+) holder=`).FindAllStringSubmatch(out, -1) {
			got = append(got, m[1]+" "+m[2])
		}
		check("watch", got)
	}
}

// shown is what ls --json and inspect --json say about a name's holders.
type shown struct {
	Mode    string
	Holders []struct {
		Mode  string
		Fence int64
	}
}
