package main_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// The flags every command takes work before the command, after it, between its arguments, as
// --flag=value, with one dash; --url and REDIS_URL take host:port too (#29: "lockkit --url … ls"
// failed with unknown command "--url").
func TestCLI_flagsAnywhere(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	acquire(t, locktest.NewClient(t, srv.Client(t)), context.Background(), "x")
	url, addr := "redis://"+srv.Addr(), srv.Addr()
	for _, tc := range []struct {
		env  string
		args []string
	}{
		{"", []string{"--url", url, "inspect", "x"}},
		{"", []string{"inspect", "x", "--url", url}},
		{"", []string{"inspect", "--url", url, "x"}},
		{"", []string{"--url=" + url, "inspect", "x"}},
		{"", []string{"-url", url, "inspect", "x"}},
		{"", []string{"--url", addr, "inspect", "x"}},
		{"", []string{"--timeout", "2s", "--prefix", "lockkit:", "--url", addr, "inspect", "x"}},
		{"", []string{"--json", "--url", addr, "inspect", "x"}},
		{"", []string{"--cluster=false", "--url", addr, "--", "inspect", "x"}},
		{"REDIS_URL=" + addr, []string{"inspect", "x"}},
		{"REDIS_URL=" + url, []string{"inspect", "--", "x"}},
	} {
		s := newSession(t, bin, "REDIS_URL=")
		if tc.env != "" {
			s.env = append(s.env, tc.env)
		}
		out, stderr, code := s.run3("", tc.args...)
		held := heldYes.MatchString(out) || strings.Contains(out, `"held":true`)
		if code != 0 || !held || stderr != "" {
			t.Errorf("%s lockkit %s: exit %d, want 0 and the lock held:\n%s%s", tc.env, strings.Join(tc.args, " "), code, out, stderr)
		}
	}
}

// "lockkit help CMD", "lockkit CMD -h", "lockkit CMD --help" and "lockkit -h CMD" print the
// command's usage on stdout and exit 0; every flag the command takes is in it.
func TestCLI_helpPerCommand(t *testing.T) {
	bin := build(t)
	s := newSession(t, bin, "REDIS_URL=")
	main, _, code := s.run3("", "help")
	if code != 0 || !strings.Contains(main, "Commands:\n") {
		t.Fatalf("lockkit help: exit %d:\n%s", code, main)
	}
	for _, variant := range [][]string{{"-h"}, {"--help"}, {"--url", "h:1", "-h"}} {
		if out, _, code := s.run3("", variant...); code != 0 || out != main {
			t.Errorf("lockkit %v: exit %d, want lockkit help's text:\n%s", variant, code, out)
		}
	}
	if _, stderr, code := s.run3(""); code != 2 || !strings.Contains(stderr, "Commands:\n") {
		t.Errorf("lockkit without arguments: exit %d, want 2 and the help on stderr:\n%s", code, stderr)
	}
	cmdFlags := map[string][]string{"release": {"--force", "--yes"}, "watch": {"--for", "--interval"},
		"idem": {"--body", "--retention", "--method", "--route", "--header", "--cert", "--principal"}}
	for _, name := range []string{"ls", "inspect", "release", "watch", "idem", "version", "help"} {
		want, stderr, code := s.run3("", "help", name)
		if code != 0 || stderr != "" || !strings.HasPrefix(want, "Usage: lockkit "+name+" ") {
			t.Errorf("lockkit help %s: exit %d:\n%s%s", name, code, want, stderr)
			continue
		}
		flags := cmdFlags[name]
		if name != "help" {
			flags = append(flags, "--url", "--cluster", "--sentinel", "--master", "--cacert", "--insecure", "--prefix", "--timeout", "--json", "--output")
		}
		for _, f := range flags {
			if !regexp.MustCompile(`(?m)^  ` + f + `\b`).MatchString(want) {
				t.Errorf("lockkit help %s does not list %s:\n%s", name, f, want)
			}
		}
		for _, args := range [][]string{{name, "-h"}, {name, "--help"}, {"-h", name}, {"--url", "h:1", name, "x", "--help"}} {
			if out, _, code := s.run3("", args...); code != 0 || out != want {
				t.Errorf("lockkit %v: exit %d, want lockkit help %s's text:\n%s", args, code, name, out)
			}
		}
	}
}

// A bad command line exits 2 and says what to type instead; a server that cannot be reached exits
// 1 with a hint. Nothing here reaches a server (REDIS_URL names a closed port).
func TestCLI_usageErrors(t *testing.T) {
	bin := build(t)
	closed := locktest.FreeAddr(t)
	s := newSession(t, bin, "REDIS_URL=redis://"+closed)
	commands := `the commands are:\n  ls \[PATTERN\] .*\n  inspect NAME .*\n  release --force NAME .*\n  watch NAME .*\n  idem SCOPE KEY .*\n  doctor .*\n  version .*\n  help \[COMMAND\] .*\n$`
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string // a regexp
	}{
		{[]string{"bogus"}, 2, `^lockkit: unknown command "bogus"; ` + commands},
		{[]string{"--url", "redis://h:1", "bogus"}, 2, `^lockkit: unknown command "bogus"; ` + commands},
		{[]string{"help", "bogus"}, 2, `^lockkit help: unknown command "bogus"; ` + commands},
		{[]string{"inpsect", "x"}, 2, `^lockkit: unknown command "inpsect"; did you mean "lockkit inspect"\? ` + commands},
		{[]string{"force-release", "x"}, 2, `^lockkit: unknown command "force-release"; did you mean "lockkit release --force"\? ` + commands},
		{[]string{"help", "wacth"}, 2, `^lockkit help: unknown command "wacth"; did you mean "lockkit watch"\? ` + commands},
		{[]string{"--url", "localhost:6379:x", "ls"}, 2, `^lockkit ls: invalid --url "localhost:6379:x": want redis://\[user:pass@\]host:port\[/db\] or host:port \(rediss:// for TLS, unix:///path for a socket\)\nRun "lockkit help ls" for its usage.\n$`},
		{[]string{"ls", "--url", "http://h:6379"}, 2, `^lockkit ls: invalid --url "http://h:6379": want redis://`},
		{[]string{"ls", "--url", "localhost"}, 2, `^lockkit ls: invalid --url "localhost": want redis://`},
		{[]string{"ls", "--url", "redis://ops:s3cret@h:x"}, 2, `^lockkit ls: invalid --url "redis://ops:xxxxx@h:x": want redis://`},
		{[]string{"--foo", "ls"}, 2, `^lockkit: unknown flag --foo before the command \(a command's own flags go after it; see "lockkit help"\)\n$`},
		{[]string{"ls", "--foo"}, 2, `^lockkit ls: unknown flag --foo\nRun "lockkit help ls" for its usage.\n$`},
		{[]string{"--url"}, 2, `^lockkit: flag --url needs an argument\n$`},
		{[]string{"--url", "h:1"}, 2, `^lockkit: no command given \(see "lockkit help"\)\n$`},
		{[]string{"watch", "--for", "5", "x"}, 2, `^lockkit watch: invalid value "5" for flag --for: want a duration such as 300ms, 5s or 1m\n`},
		{[]string{"inspect"}, 2, `^lockkit inspect: want 1 argument\(s\), got 0: lockkit inspect NAME\n`},
		{[]string{"ls", "a", "b"}, 2, `^lockkit ls: want at most 1 argument\(s\), got 2: lockkit ls \[PATTERN\]\n`},
		{[]string{"release", "x"}, 2, `^lockkit release: --force is required: this deletes a lock somebody else holds; to do so: lockkit release --force x\n`},
		{[]string{"ls", "--sentinel", "nohost", "--master", "m"}, 2, `^lockkit ls: invalid --sentinel "nohost": want host:port\n`},
		{[]string{"inspect", "x"}, 1, `^lockkit inspect: redis inspect: dial tcp ` + regexp.QuoteMeta(closed) + `: connect: connection refused\nhint: cannot reach redis://` + regexp.QuoteMeta(closed) + `: is the server up, and is --url \(or REDIS_URL\) its address\?\n$`},
	} {
		out, stderr, code := s.run3("", tc.args...)
		if code != tc.code || out != "" || !regexp.MustCompile(tc.stderr).MatchString(stderr) {
			t.Errorf("lockkit %s: exit %d (want %d), stdout %q, stderr:\n%s\nwant it to match %s", strings.Join(tc.args, " "), code, tc.code, out, stderr, tc.stderr)
		}
		if strings.Contains(stderr, "s3cret") {
			t.Errorf("lockkit %s: the password is on stderr:\n%s", strings.Join(tc.args, " "), stderr)
		}
	}
}

// Permissions and passwords: the error says what the server said, and the hint what to do.
func TestCLI_hints(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t, redistest.WithACL(
		"user lockkit-ops on >ops-secret resetkeys ~lockkit:* resetchannels &lockkit:* -@all +ping"))
	s := newSession(t, bin, "REDIS_URL=")
	for _, tc := range []struct {
		url, hint string
	}{
		{"redis://lockkit-ops:ops-secret@" + srv.Addr(), `hint: the Redis user lacks a permission this command needs; docs/security.md \("The lockkit command's ACL"\) lists them`},
		{"redis://lockkit-ops:wrong@" + srv.Addr(), `hint: authenticate in the URL: --url redis://USER:PASSWORD@host:port \(or REDIS_URL\)`},
	} {
		_, stderr, code := s.run3("", "ls", "--url", tc.url)
		if code != 1 || !regexp.MustCompile(`(?m)^`+tc.hint+`$`).MatchString(stderr) {
			t.Errorf("lockkit ls --url %s: exit %d, want 1 and %s:\n%s", tc.url, code, tc.hint, stderr)
		}
	}
}

// -o json, -o text and --output select the output format, before or after the command, as
// kubectl's and etcdctl's -o (#37: "-o json" answered "unknown flag --o").
func TestCLI_outputFlag(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	acquire(t, locktest.NewClient(t, srv.Client(t)), context.Background(), "x")
	s := newSession(t, bin, "REDIS_URL=redis://"+srv.Addr())
	for _, tc := range []struct {
		args     []string
		wantJSON bool
	}{
		{[]string{"-o", "json", "inspect", "x"}, true},
		{[]string{"inspect", "x", "-o", "json"}, true},
		{[]string{"inspect", "-o=json", "x"}, true},
		{[]string{"--output", "json", "inspect", "x"}, true},
		{[]string{"inspect", "x", "--output=json"}, true},
		{[]string{"inspect", "x", "-o", "text"}, false},
		{[]string{"--json", "inspect", "x", "-o", "text"}, false},
	} {
		out, stderr, code := s.run3("", tc.args...)
		var o map[string]any
		isJSON := json.Unmarshal([]byte(out), &o) == nil
		if code != 0 || stderr != "" || isJSON != tc.wantJSON || (!tc.wantJSON && !heldYes.MatchString(out)) {
			t.Errorf("lockkit %s: exit %d, JSON %v (want %v):\n%s%s", strings.Join(tc.args, " "), code, isJSON, tc.wantJSON, out, stderr)
		}
	}
	if _, stderr, code := s.run3("", "inspect", "x", "-o", "yaml"); code != 2 || !strings.HasPrefix(stderr, `lockkit inspect: invalid value "yaml" for flag -o: want text or json`) {
		t.Errorf("-o yaml: exit %d, want 2 and what -o takes:\n%s", code, stderr)
	}
}

// version prints the module version and the VCS commit the binary records, as "go version -m"
// reads them, in text and JSON, without a server (#37).
func TestCLI_version(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "lockkit")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	m, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	rev := regexp.MustCompile(`(?m)^\s+build\s+vcs\.revision=([0-9a-f]{40})$`).FindStringSubmatch(string(m))
	if rev == nil {
		t.Skipf("the binary records no VCS commit (not built from a git checkout):\n%s", m)
	}
	mod := regexp.MustCompile(`(?m)^\s+mod\s+github.com/lockkit/lockkit\s+(\S+)`).FindStringSubmatch(string(m))
	if mod == nil {
		t.Fatalf("no module version in:\n%s", m)
	}
	s := newSession(t, bin, "REDIS_URL=redis://"+locktest.FreeAddr(t))
	out, stderr, code := s.run3("", "version")
	want := regexp.MustCompile(`^lockkit ` + regexp.QuoteMeta(mod[1]) + ` commit ` + rev[1] + `( \(modified\))? of \S+ go1\.\S+\n$`)
	if code != 0 || stderr != "" || !want.MatchString(out) {
		t.Errorf("lockkit version: exit %d, %q, want it to match %s; stderr %q", code, out, want, stderr)
	}
	out, _, code = s.run3("", "version", "-o", "json")
	var v struct{ Version, Commit, Go string }
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || v.Version != mod[1] || v.Commit != rev[1] || v.Go == "" {
		t.Errorf("lockkit version -o json: exit %d, %v: %s", code, err, out)
	}
}

// With Redis down every command says one error and one hint on stderr, nothing from go-redis's
// pool (#37: 4 to 7 lines of "redis: connection pool: failed to dial" came first).
func TestCLI_serverDown_oneErrorPerCommand(t *testing.T) {
	bin := build(t)
	closed := locktest.FreeAddr(t)
	s := newSession(t, bin, "REDIS_URL=redis://"+closed)
	for _, args := range [][]string{
		{"ls"}, {"inspect", "x"}, {"watch", "--for", "1s", "x"}, {"idem", "http-idem", "k"},
		{"release", "--force", "--yes", "x"}, {"ls", "--cluster"}, {"ls", "--sentinel", closed, "--master", "m"},
	} {
		out, stderr, code := s.run3("", args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 1 || out != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "lockkit "+args[0]+": ") ||
			!strings.Contains(lines[0], closed) || !strings.HasPrefix(lines[1], "hint: cannot reach ") || !strings.Contains(lines[1], closed) {
			t.Errorf("lockkit %s: exit %d, want 1 and two lines on stderr, the error and a hint naming %s:\n%s", strings.Join(args, " "), code, closed, stderr)
		}
	}
}
