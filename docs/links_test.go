package docs_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

var (
	// repoURL is how a comment links a file of the repository by its address.
	repoURL = regexp.MustCompile(`https://github\.com/lockkit/lockkit/blob/main/([A-Za-z0-9_./-]+\.md)`)
	// otherURL is any other address: not a file of the repository.
	otherURL = regexp.MustCompile(`[a-z]+://\S+`)
	// mdPath is a path to a Markdown file as comments write it: docs/keys.md, README.md.
	mdPath = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)
)

// TestLinks_goCommentsNameDocsThatExist checks that every Markdown file a comment of a .go file
// of the repository names (docs/keys.md, README.md, a blob address of the repository) exists: a
// path is looked up from the file's directory, from the repository's root, then from docs/, with
// the file name's case as written.
func TestLinks_goCommentsNameDocsThatExist(t *testing.T) {
	root := locktest.RepoRoot(t)
	checked := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, g := range f.Comments {
			for _, link := range mdLinks(g.Text()) {
				checked++
				if !exists(filepath.Join(filepath.Dir(p), link), filepath.Join(root, link), filepath.Join(root, "docs", link)) {
					t.Errorf("%s: a comment names %s, which does not exist", rel, link)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked %d links in Go comments: the scan finds too few", checked)
	}
}

// mdLinks returns the Markdown files that text names.
func mdLinks(text string) []string {
	var links []string
	for _, m := range repoURL.FindAllStringSubmatch(text, -1) {
		links = append(links, m[1])
	}
	text = otherURL.ReplaceAllString(text, " ")
	return append(links, mdPath.FindAllString(text, -1)...)
}

// exists reports whether a file is at one of paths, spelled with the same case.
func exists(paths ...string) bool {
	for _, p := range paths {
		entries, err := os.ReadDir(filepath.Dir(p))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Name() == filepath.Base(p) && !e.IsDir() {
				return true
			}
		}
	}
	return false
}
