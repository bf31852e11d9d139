package locktest

import (
	"reflect"
	"testing"
)

const sample = "# Top\n\nintro\n\n## A\n\n```\nuser x on >pw +get\n```\n\n| key | type |\n|---|---|\n| `a\\|b` | string |\n| `c` | hash, or `d` |\n\n```\n# not a heading\n```\n\n### A.1\n\ntext\n\n| h |\n|:-:|\n| r |\n\n## B\n\nlast\n"

func TestMarkdown(t *testing.T) {
	a := Section(t, sample, "A")
	if want := "\n```\nuser x on >pw +get\n```\n\n| key | type |\n|---|---|\n| `a\\|b` | string |\n| `c` | hash, or `d` |\n\n```\n# not a heading\n```\n\n### A.1\n\ntext\n\n| h |\n|:-:|\n| r |\n"; a != want {
		t.Errorf("Section A = %q", a)
	}
	if got := Section(t, sample, "B"); got != "\nlast\n" {
		t.Errorf("Section B = %q", got)
	}
	if got := CodeBlocks(a); !reflect.DeepEqual(got, []string{"user x on >pw +get", "# not a heading"}) {
		t.Errorf("CodeBlocks = %q", got)
	}
	if got := ACLUsers(sample); !reflect.DeepEqual(got, map[string]string{"x": "user x on >pw +get"}) {
		t.Errorf("ACLUsers = %q", got)
	}
	want := []Table{
		{Header: []string{"key", "type"}, Rows: [][]string{{"`a|b`", "string"}, {"`c`", "hash, or `d`"}}},
		{Header: []string{"h"}, Rows: [][]string{{"r"}}},
	}
	if got := Tables(sample); !reflect.DeepEqual(got, want) {
		t.Errorf("Tables = %q", got)
	}
	if got := TableRows(sample); len(got) != 3 {
		t.Errorf("TableRows = %q", got)
	}
	if got := CodeSpans("`c` and `d`, `e"); !reflect.DeepEqual(got, []string{"c", "d"}) {
		t.Errorf("CodeSpans = %q", got)
	}
}
