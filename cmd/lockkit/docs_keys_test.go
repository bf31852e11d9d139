package main_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// docKey finds a Redis key (or key pattern) that a doc names: lockkit:… with a {…} hash tag.
var docKey = regexp.MustCompile("lockkit:[^\\s'`\"{]*\\{[^\\s'`\"]*")

// The keys docs/troubleshooting.md tells an operator to look at are keys of docs/keys.md's table,
// the one source of the key schema (#27: it named cronlock's tick marker lockkit:cron:{cron/JOB}:TICK,
// which cronlock does not write).
func TestDocs_troubleshootingKeysAreInKeysMd(t *testing.T) {
	table := keyTable(t)
	b, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := docKey.FindAllString(string(b), -1)
	if len(keys) < 4 {
		t.Fatalf("found %d keys in troubleshooting.md: %q", len(keys), keys)
	}
	for _, k := range keys {
		concrete := strings.ReplaceAll(k, "*", "x") // a SCAN pattern: one key it matches
		found := false
		for _, row := range table {
			found = found || row.MatchString(concrete)
		}
		if !found {
			t.Errorf("troubleshooting.md names the key %q, which no row of docs/keys.md's table describes", k)
		}
	}
}

// keyTable returns the keys of docs/keys.md's table as patterns: an upper-case placeholder (NAME,
// JOB, TICK, HASH, FENCE) stands for any text.
func keyTable(t *testing.T) []*regexp.Regexp {
	t.Helper()
	b, err := os.ReadFile("../../docs/keys.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []*regexp.Regexp
	span := regexp.MustCompile("`(lockkit:[^`]+)`")
	placeholder := regexp.MustCompile(`[A-Z]{2,}`)
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`lockkit:") {
			continue
		}
		for _, m := range span.FindAllStringSubmatch(cells[1], -1) {
			re := placeholder.ReplaceAllString(regexp.QuoteMeta(m[1]), ".+")
			rows = append(rows, regexp.MustCompile("^"+re+"$"))
		}
	}
	if len(rows) < 10 {
		t.Fatalf("found %d keys in docs/keys.md's table", len(rows))
	}
	return rows
}
