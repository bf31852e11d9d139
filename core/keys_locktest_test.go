package core_test

import (
	"slices"
	"testing"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// TestKeys_locktestKeyMatchesStore checks that locktest.Key, which the tests of every module use
// to name the keys they read, builds the keys core computes (core/internal/store, docs/keys.md).
func TestKeys_locktestKeyMatchesStore(t *testing.T) {
	k := locktest.Key
	want := []string{k("job"), k("job", "released"), k("job", "queue"), k("job", "queue", "deadlines"),
		k("job", "permits"), k("job", "permits", "released"), k("job", "permits", "queue"),
		k("job", "permits", "queue", "deadlines"), k("job", "permits", "limits"),
		k("job", "permits", "fences"), k("job", "permits", "receipt"),
		k("job", "rw"), k("job", "rw", "released"), k("job", "rw", "queue"), k("job", "rw", "queue", "deadlines"),
		k("job", "rw", "limits"), k("job", "rw", "fences"), k("job", "rw", "receipt")}
	if got := core.StoreKeys("job"); !slices.Equal(got, want) {
		t.Fatalf("core computes\n%q\nlocktest.Key builds\n%q", got, want)
	}
}
