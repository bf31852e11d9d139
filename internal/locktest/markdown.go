package locktest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The docs that can run, run: tests read ACL lines, key tables and commands from the Markdown of
// docs/ itself, with these helpers, so that a doc and its check cannot drift apart.

// RepoRoot returns the repository's root: the directory of the root module's go.mod, found from
// the test's working directory upwards (also from a nested module such as internal/chaos).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/lockkit/lockkit\n") {
			return dir
		}
	}
	t.Fatal("the root module's go.mod not found")
	return ""
}

// Doc returns the text of a file of the repository, path relative to its root ("docs/keys.md").
func Doc(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(t), filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Section returns the part of the Markdown md under the heading whose text is heading (without
// the #s), up to the next heading of the same or a higher level; it fails the test if there is no
// such heading.
func Section(t testing.TB, md, heading string) string {
	t.Helper()
	lines := strings.Split(md, "\n")
	level, start := 0, 0
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		n := len(l) - len(strings.TrimLeft(l, "#"))
		if fenced || n == 0 || !strings.HasPrefix(l[n:], " ") {
			continue
		}
		switch {
		case level == 0 && strings.TrimSpace(l[n:]) == heading:
			level, start = n, i+1
		case level > 0 && n <= level:
			return strings.Join(lines[start:i], "\n")
		}
	}
	if level == 0 {
		t.Fatalf("no heading %q", heading)
	}
	return strings.Join(lines[start:], "\n")
}

// CodeBlocks returns the contents of the fenced code blocks of md, in order, without the fences.
func CodeBlocks(md string) []string {
	var out []string
	var cur []string
	in := false
	for _, l := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(l, "```") && !in:
			in, cur = true, nil
		case strings.HasPrefix(l, "```"):
			in = false
			out = append(out, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, l)
		}
	}
	return out
}

// Table is a Markdown table: its header's cells and its body rows' cells, with the spaces around
// them trimmed and "\|" read as "|".
type Table struct {
	Header []string
	Rows   [][]string
}

// Tables returns the tables of md, in order.
func Tables(md string) []Table {
	var out []Table
	var cur *Table      // the table being read, nil outside one
	var header []string // the previous line's cells, if it may be a table's header
	for _, l := range strings.Split(md, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			cur, header = nil, nil
			continue
		}
		cells := splitRow(l)
		switch {
		case cur != nil:
			cur.Rows = append(cur.Rows, cells)
		case header != nil && isSeparator(cells):
			out = append(out, Table{Header: header})
			cur = &out[len(out)-1]
		default:
			header = cells
		}
	}
	return out
}

// TableRows returns the body rows of every table of md.
func TableRows(md string) [][]string {
	var out [][]string
	for _, t := range Tables(md) {
		out = append(out, t.Rows...)
	}
	return out
}

// splitRow splits a table row into cells at the pipes that are not escaped.
func splitRow(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(l); i++ {
		switch {
		case l[i] == '\\' && i+1 < len(l) && l[i+1] == '|':
			cur.WriteByte('|')
			i++
		case l[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(l[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

func isSeparator(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" || c == "" {
			return false
		}
	}
	return true
}

// CodeSpans returns the texts of the backtick spans of s (a table cell, a sentence), in order.
func CodeSpans(s string) []string {
	var out []string
	for {
		i := strings.IndexByte(s, '`')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(s[i+1:], '`')
		if j < 0 {
			return out
		}
		out = append(out, s[i+1:i+1+j])
		s = s[i+2+j:]
	}
}

// ACLUsers returns the Redis ACL user lines of md, by user name: the fenced code blocks that start
// with "user NAME ".
func ACLUsers(md string) map[string]string {
	out := map[string]string{}
	for _, b := range CodeBlocks(md) {
		if f := strings.Fields(b); len(f) > 1 && f[0] == "user" {
			out[f[1]] = strings.TrimSpace(b)
		}
	}
	return out
}
