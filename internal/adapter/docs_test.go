package adapter_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// adapterDirs are the adapters' package directories, from the repository's root. The nested
// modules' sources are parsed, not imported: the root module cannot require them.
var adapterDirs = map[string]string{
	"httpmw":     "middleware/httpmw",
	"grpcmw":     "middleware/grpcmw",
	"asynqlock":  "jobs/asynqlock",
	"cronlock":   "jobs/cronlock",
	"gocronlock": "jobs/gocronlock",
}

// exported returns the package-level exported names of the package in dir (functions, types,
// constants, variables; no methods) with their doc comments.
func exported(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names[d.Name.Name] = d.Doc.Text()
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					doc := d.Doc.Text()
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Doc != nil {
							doc = s.Doc.Text()
						}
						if s.Name.IsExported() {
							names[s.Name.Name] = doc
						}
					case *ast.ValueSpec:
						if s.Doc != nil {
							doc = s.Doc.Text()
						}
						for _, n := range s.Names {
							if n.IsExported() {
								names[n.Name] = doc
							}
						}
					}
				}
			}
		}
	}
	return names
}

// nameOf returns the identifier a code span starts with: "WithTTL(d)" → "WithTTL".
func nameOf(span string) string {
	return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*`).FindString(span)
}

// adaptersIn returns the adapters named in s before its first ';' or '(' (the rest of a cell
// qualifies them).
func adaptersIn(s string) []string {
	if i := strings.IndexAny(s, ";("); i >= 0 {
		s = s[:i]
	}
	var out []string
	for _, w := range regexp.MustCompile(`[a-z]+`).FindAllString(s, -1) {
		if _, ok := adapterDirs[w]; ok {
			out = append(out, w)
		}
	}
	return out
}

// The tables of docs/adapters.md are the contract as users read it: every option and helper they
// list exists in every adapter they name, and every deprecated name exists and is marked
// "Deprecated: use X".
func TestDocs_adapterContract(t *testing.T) {
	root := locktest.RepoRoot(t)
	names := map[string]map[string]string{}
	for pkg, dir := range adapterDirs {
		names[pkg] = exported(t, filepath.Join(root, dir))
	}
	md := locktest.Doc(t, "docs/adapters.md")
	checked := 0
	for _, heading := range []string{"Option names", "One key vocabulary"} {
		for _, row := range locktest.TableRows(locktest.Section(t, md, heading)) {
			if len(row) < 3 {
				continue
			}
			var opts []string
			for _, span := range locktest.CodeSpans(row[0]) {
				opts = append(opts, nameOf(span))
			}
			pkgs := adaptersIn(row[2])
			if len(opts) == 0 || len(pkgs) == 0 {
				t.Errorf("%s: row %q names no option or no adapter", heading, row)
				continue
			}
			for _, pkg := range pkgs {
				found := false
				for _, o := range opts {
					_, ok := names[pkg][o]
					found = found || ok
				}
				if !found {
					t.Errorf("%s: %s has none of %v", heading, pkg, opts)
				}
				checked++
			}
		}
	}
	for _, row := range locktest.TableRows(locktest.Section(t, md, "Deprecated names (kept one release, until v0.3.0)")) {
		if len(row) < 3 {
			continue
		}
		pkg := strings.TrimSpace(row[0])
		if names[pkg] == nil {
			t.Errorf("deprecated names: unknown adapter %q", pkg)
			continue
		}
		for _, span := range locktest.CodeSpans(row[1]) {
			n := nameOf(span)
			doc, ok := names[pkg][n]
			switch {
			case !ok:
				t.Errorf("%s.%s is listed as deprecated but does not exist", pkg, n)
			case !strings.Contains(doc, "Deprecated: use "):
				t.Errorf("%s.%s is not marked \"Deprecated: use X\": %q", pkg, n, doc)
			}
			checked++
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d names: the tables of docs/adapters.md were not found", checked)
	}
}
