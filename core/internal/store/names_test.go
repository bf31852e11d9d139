package store

import (
	"testing"
)

// Issue #16, defect 8: a key's slot is decided by its first hash tag, as Redis reads it.
func TestHashTag_asRedisReadsIt(t *testing.T) {
	for _, tc := range []struct {
		key, name string
		same      bool
	}{
		{"lockkit:idem:{n}", "n", true},
		{"{n}", "n", true},
		{"x{n}}", "n", true},                // the tag ends at the first '}'
		{"}{n}", "n", true},                 // a '}' before the first '{' does not count
		{"x{n}{a}", "n", true},              // only the first tag counts
		{"x{a}{n}", "n", false},             // the first tag is a: another slot
		{"{}{n}", "n", false},               // an empty first tag: Redis hashes the whole key
		{"x{n", "n", false},                 // no closing brace: the whole key
		{"{{n}", "n", false},                // the tag is "{n"
		{"x{ n}", "n", false},               // the tag is " n"
		{"lockkit:n", "n", false},           // no tag
		{"lockkit:idem:{a}b}", "a}b", true}, // the lock key lockkit:{a}b} hashes as "a"
		{"lockkit:idem:{a}", "a}b", true},
		{"lockkit:idem:{a}b}", "a", true},
		{"lockkit:idem:{b}{a}b}", "a}b", false},
	} {
		if got := SameSlot(tc.key, tc.name); got != tc.same {
			t.Errorf("SameSlot(%q, %q) = %v, want %v", tc.key, tc.name, got, tc.same)
		}
	}
	var k Keys
	k.Init("lockkit:", "a}b")
	if HashTag(k.Main) != "a" || !SameSlot(k.Main, "a}b") {
		t.Errorf("lock key %q hashes as %q", k.Main, HashTag(k.Main))
	}
}
