package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// TestGuarantees_tableNamesTestsThatExist checks that every test the opening table of
// docs/guarantees.md names ("tested by") is a test function of the repository.
func TestGuarantees_tableNamesTestsThatExist(t *testing.T) {
	var names []string
	for _, tab := range locktest.Tables(locktest.Doc(t, "docs/guarantees.md")) {
		if len(tab.Header) != 3 || tab.Header[2] != "tested by" {
			continue
		}
		for _, r := range tab.Rows {
			for _, m := range regexp.MustCompile("`(Test[A-Za-z0-9_]+)`").FindAllStringSubmatch(r[2], -1) {
				names = append(names, m[1])
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("docs/guarantees.md: the promise | holds under | tested by table names %d tests", len(names))
	}
	var src strings.Builder
	root := locktest.RepoRoot(t)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		src.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.Contains(src.String(), "\nfunc "+n+"(") {
			t.Errorf("docs/guarantees.md names %s, which no _test.go file defines", n)
		}
	}
}
