package script

import (
	"embed"
	"fmt"
	"path"
	"strings"
	"sync"
)

//go:embed lua/*.lua
var files embed.FS

// Script is one assembled script.
type Script struct {
	// Name is its entry file without ".lua".
	Name string
	// Keys and Args are the KEYS and ARGV names its header declares, in order; Parts the files it
	// is made of (the entry file last).
	Keys, Args, Parts []string
	// ReadOnly reports flags: no-writes: the script is sent with EVALSHA_RO (EVAL_RO), which a
	// read-only ACL user (%R~) can run. (No "#!lua flags=no-writes" line: EVALSHA_RO already
	// refuses writes, and the embedded server of the lockkittest helper cannot parse one.)
	ReadOnly bool
	// Source is the assembled Lua, as sent to Redis.
	Source string

	cmd  any // "evalsha" or "evalsha_ro", boxed once
	eval any // "eval" or "eval_ro", likewise
	sha  any // its SHA-1 (hex) from hashes.go, likewise; nil if hashes.go lacks it
}

// load assembles the script of entry file name.
func load(name string) (*Script, error) {
	s := &Script{Name: strings.TrimSuffix(name, ".lua")}
	var body strings.Builder
	if err := s.expand(name, &body, map[string]bool{}, true); err != nil {
		return nil, err
	}
	var src strings.Builder
	bind(&src, "k_", "KEYS", s.Keys)
	bind(&src, "a_", "ARGV", s.Args)
	src.WriteString(body.String())
	s.Source = src.String()
	s.cmd, s.eval = "evalsha", "eval"
	if s.ReadOnly {
		s.cmd, s.eval = "evalsha_ro", "eval_ro"
	}
	return s, nil
}

// bind declares locals for the named KEYS or ARGV. The table is read once into a local (KEYS_,
// ARGV_), and each name is an index of it: a global's lookup costs Redis about 270 instructions,
// an index of a local table a few dozen, and a call of unpack more than both (`make
// server-instructions`). A last name ending in "..." takes the rest of them, as a table.
func bind(b *strings.Builder, prefix, table string, names []string) {
	if len(names) == 0 {
		return
	}
	var vars, idx []string
	for i, n := range names {
		if rest, ok := strings.CutSuffix(n, "..."); ok {
			if i == 0 {
				fmt.Fprintf(b, "local %s%s = %s\n", prefix, rest, table)
				return
			}
			fmt.Fprintf(b, "local %s = unpack(%s, 1, %d)\n", strings.Join(vars, ", "), table, i)
			fmt.Fprintf(b, "local %s%s = {unpack(%s, %d)}\n", prefix, rest, table, i+1)
			return
		}
		vars = append(vars, prefix+strings.TrimSuffix(n, "?"))
		idx = append(idx, fmt.Sprintf("%s_[%d]", table, i+1))
	}
	fmt.Fprintf(b, "local %s_ = %s\n", table, table)
	fmt.Fprintf(b, "local %s = %s\n", strings.Join(vars, ", "), strings.Join(idx, ", "))
}

// expand writes file name to b, with the parts it includes in its place (each once per script);
// entry says whether it is the entry file, whose header declares keys, args and flags.
func (s *Script) expand(name string, b *strings.Builder, seen map[string]bool, entry bool) error {
	seen[name] = true
	src, err := files.ReadFile(path.Join("lua", name))
	if err != nil {
		return err
	}

	for line := range strings.Lines(string(src)) {
		line = strings.TrimSuffix(line, "\n")
		dir, ok := strings.CutPrefix(line, "--! ")
		if !ok {
			b.WriteString(line + "\n")
			continue
		}
		word, rest, _ := strings.Cut(dir, " ")
		switch {
		case word == "include":
			if !seen[rest] {
				if err := s.expand(rest, b, seen, false); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
		case word == "inline":
			if err := s.inline(rest, b, seen); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case entry && word == "keys:":
			s.Keys = strings.Fields(rest)
		case entry && word == "args:":
			s.Args = strings.Fields(rest)
		case entry && word == "flags:":
			s.ReadOnly = strings.TrimSpace(rest) == "no-writes"
		default:
			return fmt.Errorf("%s: unknown directive %q", name, line)
		}
	}
	s.Parts = append(s.Parts, name)
	return nil
}

// inline writes the fragment name (code, not functions, and no directives) to b each time it is
// inlined, for a hot path that must create no closure; it is listed in Parts once.
func (s *Script) inline(name string, b *strings.Builder, seen map[string]bool) error {
	src, err := files.ReadFile(path.Join("lua", name))
	if err != nil {
		return err
	}
	if strings.Contains(string(src), "\n--! ") || strings.HasPrefix(string(src), "--! ") {
		return fmt.Errorf("%s: an inlined fragment holds no directives", name)
	}
	b.Write(src)
	if !seen[name] {
		seen[name] = true
		s.Parts = append(s.Parts, name)
	}
	return nil
}

// Set holds every script.
type Set struct {
	Acquire, AcquireFair, Release, ReleaseFair, Dequeue, Renew, PTTL, RaiseFence *Script
	Inspect, ForceRelease                                                        *Script
	SemAcquire, SemRelease, SemRenew, SemPTTL, SemDequeue                        *Script
	AcquireAll, ReleaseAll                                                       *Script
	RenewMany                                                                    *Script
}

// Scripts returns the scripts, assembled once per process and never changed afterwards.
var Scripts = sync.OnceValue(func() *Set {
	x := &Set{}
	for _, e := range []struct {
		name string
		s    **Script
	}{
		{"acquire", &x.Acquire}, {"acquire_fair", &x.AcquireFair}, {"release", &x.Release},
		{"release_fair", &x.ReleaseFair}, {"dequeue", &x.Dequeue}, {"renew", &x.Renew}, {"pttl", &x.PTTL},
		{"raise_fence", &x.RaiseFence}, {"inspect", &x.Inspect}, {"force_release", &x.ForceRelease},
		{"sem_acquire", &x.SemAcquire}, {"sem_release", &x.SemRelease}, {"sem_renew", &x.SemRenew},
		{"sem_pttl", &x.SemPTTL}, {"sem_dequeue", &x.SemDequeue}, {"acquire_all", &x.AcquireAll},
		{"release_all", &x.ReleaseAll}, {"renew_many", &x.RenewMany},
	} {
		s, err := load(e.name + ".lua")
		if err != nil {
			panic("lockkit: script " + e.name + ": " + err.Error()) // the embedded files are fixed
		}

		if h, ok := knownHashes[s.Name]; ok {
			s.sha = h
		}
		*e.s = s
	}
	return x
})

// sha1hex is the code of lua/sha1hex.lua, without its comments: the script that asks the server
// for a SHA-1 (Sender).
var sha1hex = sync.OnceValue(func() string {
	src, err := files.ReadFile("lua/sha1hex.lua")
	if err != nil {
		panic("lockkit: script sha1hex: " + err.Error()) // the embedded files are fixed
	}
	var code strings.Builder
	for _, line := range strings.SplitAfter(string(src), "\n") {
		if line != "" && !strings.HasPrefix(line, "--") {
			code.WriteString(line)
		}
	}
	return code.String()
})
