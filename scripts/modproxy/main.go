// Command modproxy publishes the Go modules of this repository's working tree the way a release
// would, without a release: it writes them into a directory laid out as a Go module proxy
// (GOPROXY=file://DIR), every module at one pseudo-version, each go.mod requiring the repository's
// other modules at that version. With -copies it also writes each module's files as a plain
// directory whose go.mod has that version and no replace directive for the repository's modules:
// what a user gets, built against the other modules as the proxy serves them.
//
//	go run ./scripts/modproxy -proxy DIR [-copies DIR] [-version V] MODULE_DIR...
//	go run ./scripts/modproxy -bump V MODULE_DIR...
//
// It prints the version on the first line, then one "DIR PATH" line per module. With -bump it
// publishes nothing: it sets, in place, every go.mod's requirements on the repository's modules to
// V (what scripts/release.sh does before it tags the nested modules). Run it from the root of the
// repository. A module holds
// the files git tracks or would track (git ls-files --cached --others --exclude-standard) under
// its directory, minus those of nested modules, as they are in the working tree. The default
// version is a pseudo-version after the highest release (a v* tag, or the highest version a
// go.mod requires of the repository's modules) with the current time and HEAD's hash, so that
// every run makes a version no module cache holds yet.
//
// scripts/modcheck.sh uses it; it needs git and the go command, and nothing else.
package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

func main() {
	proxy := flag.String("proxy", "", "directory to write the module proxy into (required)")
	copies := flag.String("copies", "", "directory to write each module's files into, with go.mod rewritten")
	version := flag.String("version", "", "version to publish (default: a new pseudo-version)")
	bump := flag.String("bump", "", "set the requirements on the repository's modules to this version, in place")
	flag.Parse()
	if (*proxy == "") == (*bump == "") || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -proxy DIR [-copies DIR] [-version V] MODULE_DIR...\n       modproxy -bump V MODULE_DIR...")
		os.Exit(2)
	}
	var err error
	if *bump != "" {
		err = bumpRequires(*bump, flag.Args())
	} else {
		err = run(*proxy, *copies, *version, flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// module is one go.mod of the working tree.
type module struct {
	dir     string // slash-separated, relative to the repository root; "." for the root
	modPath string // module path
	gomod   modFile
	files   []string // relative to the repository root, slash-separated
}

// modFile is the part of `go mod edit -json` used here.
type modFile struct {
	Module  struct{ Path string }
	Require []struct{ Path, Version string }
	Replace []struct {
		Old struct{ Path, Version string }
	}
}

// readModules reads the go.mod of each directory; byPath holds their module paths.
func readModules(dirs []string) (mods []*module, byPath map[string]bool, err error) {
	byPath = map[string]bool{}
	for _, d := range dirs {
		m := &module{dir: path.Clean(filepath.ToSlash(d))}
		out, err := command("go", "mod", "edit", "-json", filepath.Join(d, "go.mod"))
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal(out, &m.gomod); err != nil {
			return nil, nil, fmt.Errorf("%s/go.mod: %v", d, err)
		}
		m.modPath = m.gomod.Module.Path
		byPath[m.modPath] = true
		mods = append(mods, m)
	}
	return mods, byPath, nil
}

// bumpRequires sets every requirement of the modules in dirs on one of them to version.
func bumpRequires(version string, dirs []string) error {
	if _, ok := release(version); !ok {
		return fmt.Errorf("%s is not a release version vX.Y.Z", version)
	}
	mods, byPath, err := readModules(dirs)
	if err != nil {
		return err
	}
	for _, m := range mods {
		gomod, err := rewriteGoMod(m, byPath, version, false)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(filepath.FromSlash(m.dir), "go.mod"), gomod, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func run(proxyDir, copiesDir, version string, dirs []string) error {
	mods, byPath, err := readModules(dirs)
	if err != nil {
		return err
	}
	if err := assignFiles(mods); err != nil {
		return err
	}
	if version == "" {
		v, err := pseudoVersion(mods, byPath)
		if err != nil {
			return err
		}
		version = v
	}
	now := time.Now().UTC()
	for _, m := range mods {
		gomod, err := rewriteGoMod(m, byPath, version, false)
		if err != nil {
			return err
		}
		if err := publish(proxyDir, m, version, now, gomod); err != nil {
			return fmt.Errorf("%s: %v", m.dir, err)
		}
		if copiesDir != "" {
			own, err := rewriteGoMod(m, byPath, version, true)
			if err != nil {
				return err
			}
			if err := writeCopy(filepath.Join(copiesDir, filepath.FromSlash(m.dir)), m, own); err != nil {
				return fmt.Errorf("%s: %v", m.dir, err)
			}
		}
	}
	fmt.Println(version)
	for _, m := range mods {
		fmt.Println(m.dir, m.modPath)
	}
	return nil
}

// assignFiles gives every file of the working tree to the innermost module directory holding it.
func assignFiles(mods []*module) error {
	out, err := command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		fi, err := os.Lstat(f)
		if err != nil || !fi.Mode().IsRegular() { // deleted in the working tree, or a symlink
			continue
		}
		var owner *module
		depth := -1
		for _, m := range mods {
			switch {
			case m.dir == "." && depth < 0:
				owner, depth = m, 0
			case m.dir != "." && strings.HasPrefix(f, m.dir+"/") && len(m.dir) > depth:
				owner, depth = m, len(m.dir)
			}
		}
		if owner == nil {
			continue
		}
		owner.files = append(owner.files, f)
	}
	for _, m := range mods {
		sort.Strings(m.files)
	}
	return nil
}

// rewriteGoMod returns m's go.mod with every requirement on one of the repository's modules set
// to version and, when dropReplace is set, without replace directives for those modules.
func rewriteGoMod(m *module, repo map[string]bool, version string, dropReplace bool) ([]byte, error) {
	src, err := os.ReadFile(filepath.Join(filepath.FromSlash(m.dir), "go.mod"))
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp("", "modproxy-*.mod")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(src); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	args := []string{"mod", "edit"}
	for _, r := range m.gomod.Require {
		if repo[r.Path] {
			args = append(args, "-require="+r.Path+"@"+version)
		}
	}
	if dropReplace {
		for _, r := range m.gomod.Replace {
			if repo[r.Old.Path] {
				old := r.Old.Path
				if r.Old.Version != "" {
					old += "@" + r.Old.Version
				}
				args = append(args, "-dropreplace="+old)
			}
		}
	}
	if len(args) > 2 {
		if _, err := command("go", append(args, tmp.Name())...); err != nil {
			return nil, err
		}
	}
	return os.ReadFile(tmp.Name())
}

// publish writes m at version into the proxy directory: list, .info, .mod and .zip.
func publish(proxyDir string, m *module, version string, t time.Time, gomod []byte) error {
	esc, err := escapePath(m.modPath)
	if err != nil {
		return err
	}
	dir := filepath.Join(proxyDir, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t})
	if err != nil {
		return err
	}
	if err := appendLine(filepath.Join(dir, "list"), version); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".info"), info, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, version+".mod"), gomod, 0o644); err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	prefix := m.modPath + "@" + version + "/"
	for _, f := range m.files {
		rel := f
		if m.dir != "." {
			rel = strings.TrimPrefix(f, m.dir+"/")
		}
		w, err := zw.Create(prefix + rel)
		if err != nil {
			return err
		}
		if rel == "go.mod" {
			_, err = w.Write(gomod)
		} else {
			err = copyFile(w, f)
		}
		if err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, version+".zip"), buf.Bytes(), 0o644)
}

// writeCopy writes m's files under dir, with gomod as its go.mod.
func writeCopy(dir string, m *module, gomod []byte) error {
	for _, f := range m.files {
		rel := f
		if m.dir != "." {
			rel = strings.TrimPrefix(f, m.dir+"/")
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if rel == "go.mod" {
			if err := os.WriteFile(dst, gomod, 0o644); err != nil {
				return err
			}
			continue
		}
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if err := copyFile(out, f); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	return nil
}

// pseudoVersion returns vX.Y.(Z+1)-0.TIME-HASH after the highest release vX.Y.Z (a tag, or a
// version a go.mod requires of the repository's modules), or v0.0.0-TIME-HASH without one.
func pseudoVersion(mods []*module, repo map[string]bool) (string, error) {
	hash := "000000000000"
	if out, err := command("git", "rev-parse", "--short=12", "HEAD"); err == nil {
		hash = strings.TrimSpace(string(out))
	}
	var best [3]int
	found := false
	consider := func(v string) {
		if n, ok := release(v); ok && (!found || less(best, n)) {
			best, found = n, true
		}
	}
	if out, err := command("git", "tag", "--list", "v*"); err == nil {
		for _, t := range strings.Fields(string(out)) {
			consider(t)
		}
	}
	for _, m := range mods {
		for _, r := range m.gomod.Require {
			if repo[r.Path] {
				consider(r.Version)
			}
		}
	}
	ts := time.Now().UTC().Format("20060102150405")
	if !found {
		return fmt.Sprintf("v0.0.0-%s-%s", ts, hash), nil
	}
	return fmt.Sprintf("v%d.%d.%d-0.%s-%s", best[0], best[1], best[2]+1, ts, hash), nil
}

// release parses a release version vX.Y.Z (no pre-release, no build metadata).
func release(v string) ([3]int, bool) {
	var n [3]int
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if !strings.HasPrefix(v, "v") || len(parts) != 3 {
		return n, false
	}
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || (len(p) > 1 && p[0] == '0') {
			return n, false
		}
		n[i] = x
	}
	return n, true
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// escapePath applies the module proxy's case encoding: each upper-case letter becomes '!' and the
// letter in lower case.
func escapePath(p string) (string, error) {
	var b strings.Builder
	for _, r := range p {
		switch {
		case r == '!' || r > unicode.MaxASCII:
			return "", fmt.Errorf("module path %q: unsupported character %q", p, r)
		case unicode.IsUpper(r):
			b.WriteByte('!')
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}

func appendLine(name, line string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func copyFile(w io.Writer, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// command runs name with args in the current directory and returns its standard output.
func command(name string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return nil, err
	}
	return out, nil
}
