package script

import (
	"context"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/redistest"
)

// all returns every script of the set.
func all() []*Script {
	v := reflect.ValueOf(*Scripts())
	var out []*Script
	for i := range v.NumField() {
		out = append(out, v.Field(i).Interface().(*Script))
	}
	return out
}

// Each builder's fields are its script's KEYS then ARGV, in the header's order and under its
// names: the call site names what the script numbers.
func TestCalls_matchHeaders(t *testing.T) {
	set := Scripts()
	builders := map[*Script]any{
		set.Acquire: Acquire{}, set.AcquireFair: AcquireFair{}, set.Release: Release{},
		set.ReleaseFair: ReleaseFair{}, set.Dequeue: Dequeue{}, set.Renew: Renew{}, set.PTTL: PTTL{},
		set.RaiseFence: RaiseFence{}, set.Inspect: Inspect{}, set.ForceRelease: ForceRelease{},
		set.SemAcquire: SemAcquire{}, set.SemRelease: SemRelease{}, set.SemRenew: SemRenew{},
		set.SemPTTL: SemPTTL{}, set.SemDequeue: SemDequeue{}, set.AcquireAll: AcquireAll{},
		set.ReleaseAll: ReleaseAll{}, set.RenewMany: RenewMany{},
	}
	if len(builders) != len(all()) {
		t.Fatalf("%d builders for %d scripts", len(builders), len(all()))
	}
	for s, b := range builders {
		typ := reflect.TypeOf(b)
		var keys, args []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Tag.Get("script") == "-" {
				continue // (not the script's: a form of another field)
			}
			name := strings.ToLower(f.Name)
			if f.Type.Kind() == reflect.String || f.Type == reflect.TypeOf([]string(nil)) {
				if len(args) > 0 {
					t.Errorf("%s: key field %s after an argument", typ.Name(), f.Name)
				}
				keys = append(keys, name)
			} else {
				args = append(args, name)
			}
		}
		norm := func(names []string) []string {
			out := make([]string, len(names))
			for i, n := range names {
				out[i] = strings.ReplaceAll(strings.TrimSuffix(strings.TrimSuffix(n, "?"), "..."), "_", "")
			}
			return out
		}
		if !slices.Equal(keys, norm(s.Keys)) || !slices.Equal(args, norm(s.Args)) {
			t.Errorf("%s: builder %s has keys %v args %v; the script declares keys %v args %v",
				s.Name, typ.Name(), keys, args, s.Keys, s.Args)
		}
		for _, list := range [][]string{s.Keys, s.Args} {
			for i, n := range list {
				if strings.HasSuffix(n, "?") {
					for _, after := range list[i+1:] {
						if !strings.HasSuffix(after, "?") {
							t.Errorf("%s: optional %s before required %s", s.Name, n, after)
						}
					}
				}
			}
		}
	}
}

// Every script compiles on a real server, every part it includes appears once, every KEYS and ARGV
// it uses is declared, and only read-only scripts carry the no-writes flag.
func TestScripts_loadAndDeclare(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	for _, s := range all() {
		if err := rdb.ScriptLoad(ctx, s.Source).Err(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		body := s.Source // without the lines that bind KEYS and ARGV (bind)
		for _, prefix := range []string{"local KEYS_ = KEYS\n", "local k_", "local ARGV_ = ARGV\n", "local a_"} {
			if strings.HasPrefix(body, prefix) {
				body = body[strings.IndexByte(body, '\n')+1:]
			}
		}
		if strings.Contains(body, "KEYS[") || strings.Contains(body, "ARGV[") {
			t.Errorf("%s: reads KEYS or ARGV by number instead of by the declared names", s.Name)
		}
		declared := map[string]bool{}
		for _, n := range s.Keys {
			declared["k_"+strings.TrimSuffix(strings.TrimSuffix(n, "?"), "...")] = true
		}
		for _, n := range s.Args {
			declared["a_"+strings.TrimSuffix(strings.TrimSuffix(n, "?"), "...")] = true
		}
		used := map[string]bool{}
		for _, n := range nameRE.FindAllString(body, -1) {
			used[n] = true
			if !declared[n] {
				t.Errorf("%s: uses %s, which its header does not declare", s.Name, n)
			}
		}
		for n := range declared {
			if !used[n] {
				t.Errorf("%s: declares %s but never uses it", s.Name, n)
			}
		}
		seen := map[string]bool{}
		for _, p := range s.Parts {
			if seen[p] {
				t.Errorf("%s: part %s included twice", s.Name, p)
			}
			seen[p] = true
		}
		if s.ReadOnly && (strings.Contains(s.Source, "'SET'") || strings.Contains(s.Source, "'DEL'")) {
			t.Errorf("%s: declared read-only but writes", s.Name)
		}
	}
}

// nameRE finds the locals the loader binds to KEYS (k_) and ARGV (a_).
var nameRE = regexp.MustCompile(`\b[ka]_[a-z_]+\b`)

// The acquire and release hot paths (an uncontended lock and unlock) end before the script
// defines any function: each closure costs Redis about 900 instructions per run (`make
// server-instructions`), so the shared parts come after them, and the fence rule, which the
// acquire hot path needs, is inlined there (once in the hot path, once in next_fence).
func TestScripts_hotPathsCreateNoClosure(t *testing.T) {
	for _, s := range []*Script{Scripts().Acquire, Scripts().Release} {
		var code strings.Builder
		for _, line := range strings.Split(s.Source, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "--") {
				code.WriteString(line + "\n")
			}
		}
		src := code.String()
		start := strings.Index(src, "\nlocal v = rcall('GET', k_lock)\n")
		if start < 0 {
			t.Fatalf("%s: no hot path (local v = GET of the lock) found", s.Name)
		}
		ret := strings.Index(src[start:], " return ")
		if ret < 0 {
			t.Fatalf("%s: the hot path does not return", s.Name)
		}
		end := start + ret + strings.Index(src[start+ret:], "\nend\n") // its if block's end
		if strings.Contains(src[:end], "function") {
			t.Errorf("%s: a function is defined before the hot path ends", s.Name)
		}
	}
	acq := Scripts().Acquire
	rule, err := files.ReadFile("lua/fence_rule.lua")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(acq.Source, string(rule)); n != 2 {
		t.Errorf("acquire: the fence rule is written %d times, want 2 (hot path, next_fence)", n)
	}
	if n := slices.Index(acq.Parts, "fence_rule.lua"); n < 0 {
		t.Errorf("acquire: parts %v do not list fence_rule.lua", acq.Parts)
	}
}
