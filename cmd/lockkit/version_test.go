package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// Built where VCS stamping is off (GOFLAGS=-buildvcs=false), version says plainly that it does not
// know, and how to build it so that it does; "make cli" stamps the version and commit with -ldflags
// whatever GOFLAGS says (#47: it printed "lockkit (devel) go1.26.8").
func TestCLI_version_withoutVCSStamping(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git history here (git rev-parse HEAD: %v): the build cannot be stamped with a commit", err)
	}
	env := append(os.Environ(), "GOFLAGS=-buildvcs=false")
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	build := exec.Command("go", "build", "-o", plain, ".")
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s := newSession(t, plain, "REDIS_URL=redis://"+locktest.FreeAddr(t))
	out, _, code := s.run3("", "version")
	if want := regexp.MustCompile(`^lockkit \(devel\) go1\.\S+ \(version unknown: built without VCS stamping; build with make cli\)\n$`); code != 0 || !want.MatchString(out) {
		t.Errorf("lockkit version, built with -buildvcs=false: exit %d, %q, want it to match %s", code, out, want)
	}
	out, _, _ = s.run3("", "version", "--json")
	if !strings.Contains(out, `"unknown":"version unknown: built without VCS stamping`) {
		t.Errorf("lockkit version --json, built with -buildvcs=false: %s, want the reason in \"unknown\"", out)
	}

	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mk := exec.Command("make", "-s", "-C", root, "cli")
	mk.Env = append(env, "GOBIN="+dir)
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make cli: %v\n%s", err, out)
	}
	s = newSession(t, filepath.Join(dir, "lockkit"), "REDIS_URL=redis://"+locktest.FreeAddr(t))
	out, _, code = s.run3("", "version")
	want := regexp.MustCompile(`^lockkit \S+ commit ` + strings.TrimSpace(string(head)) + `( \(modified\))? of \S+ go1\.\S+\n$`)
	if code != 0 || !want.MatchString(out) {
		t.Errorf("lockkit version, built by make cli with -buildvcs=false: exit %d, %q, want it to match %s", code, out, want)
	}
}
