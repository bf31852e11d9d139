package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The README's way to the lockkit command from a checkout works as written, in a fresh clone of
// this repository's HEAD: its "git clone" line (the URL replaced by this checkout), then the lines
// of the block that installs the command ("cd ../lockkit", "make cli", "lockkit version"), with
// GOBIN in a temporary directory; the installed command names the clone's commit (#47: the README
// said only "go install github.com/lockkit/lockkit/cmd/lockkit@latest", 403 Forbidden while the
// modules are unpublished).
func TestReadme_cliFromAFreshClone(t *testing.T) {
	for _, tool := range []string{"git", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git history in %s (git rev-parse HEAD: %v): nothing to clone", root, err)
	}
	clone, install := readmeCheckout(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	dir := filepath.Join(tmp, "work")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOBIN="+bin, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	run := func(line string) string {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		t.Logf("%s$ %s  (%.1f s)\n%s", filepath.Base(dir), line, time.Since(start).Seconds(), out)
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return string(out)
	}
	f := strings.Fields(clone)
	run(strings.Join([]string{"git", "clone", "--quiet", root, f[len(f)-1]}, " "))
	var last string
	for _, line := range install {
		if d, ok := strings.CutPrefix(line, "cd "); ok {
			dir = filepath.Join(dir, d)
			continue
		}
		last = run(line)
	}
	if want := "commit " + strings.TrimSpace(string(head)); !strings.Contains(last, want) {
		t.Errorf("the last line of the README's block printed %q, want %q in it", last, want)
	}
}

// readmeCheckout returns the README's "git clone" line and the command lines of its block that runs
// "make cli", comments cut.
func readmeCheckout(t *testing.T) (clone string, install []string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			if in && install == nil && slices.Contains(block, "make cli") {
				install = block
			}
			in, block = !in, nil
		case in:
			line, _, _ = strings.Cut(line, "#")
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			if strings.HasPrefix(line, "git clone ") && clone == "" {
				clone = line
			}
			block = append(block, line)
		}
	}
	if clone == "" || install == nil || install[len(install)-1] != "lockkit version" {
		t.Fatalf("README.md: no \"git clone\" line (%q), or no block that runs make cli and ends with lockkit version (%q)", clone, install)
	}
	return clone, install
}
