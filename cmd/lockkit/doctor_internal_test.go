package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// The service's ACL line, as doctor knows it, is the doc's; so are the optional grants doctor
// checks (semaphores and read-write locks; a cluster).
func TestDoctor_aclListsAreTheDocs(t *testing.T) {
	md := locktest.Doc(t, "docs/security.md")
	grants := func(s string) []string {
		var out []string
		for _, f := range strings.Fields(strings.ReplaceAll(s, `\|`, "|")) {
			if c, ok := strings.CutPrefix(f, "+"); ok {
				out = append(out, c)
			}
		}
		return out
	}
	if doc := grants(locktest.ACLUsers(md)["lockkit"]); !slices.Equal(serviceCommands, doc) {
		t.Errorf("doctor checks %v; docs/security.md grants %v", serviceCommands, doc)
	}
	rows := map[string][]string{}
	for _, row := range locktest.TableRows(locktest.Section(t, md, "Optional features")) {
		if spans := locktest.CodeSpans(row[len(row)-1]); len(spans) == 1 {
			rows[strings.SplitN(row[0], ":", 2)[0]] = grants(spans[0])
		}
	}
	if doc := rows["semaphores"]; !slices.Equal(permitCommands, doc) {
		t.Errorf("doctor checks %v for semaphores; docs/security.md: %v (rows %v)", permitCommands, doc, rows)
	}
	if doc := rows["Redis Cluster"]; !slices.Equal(clusterCommands, doc) {
		t.Errorf("doctor checks %v on a cluster; docs/security.md: %v (rows %v)", clusterCommands, doc, rows)
	}
}
