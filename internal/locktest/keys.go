package locktest

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// DocumentedKey checks a key written by an adapter of a module of its own against the key table of
// docs/keys.md, whose test in the root module (docs/keys_test.go) cannot import that module: the
// table has the row whose key column is row (as written, without backticks), the row's type column
// starts with typ ("string", "hash", ...), and rdb holds a key that re matches, of that Redis type,
// with a TTL.
func DocumentedKey(t testing.TB, rdb redis.Cmdable, row, typ string, re *regexp.Regexp) {
	t.Helper()
	found := false
	for _, tab := range Tables(Doc(t, "docs/keys.md")) {
		if len(tab.Header) < 2 || tab.Header[0] != "key" || tab.Header[1] != "type" {
			continue
		}
		for _, r := range tab.Rows {
			if spans := CodeSpans(r[0]); len(spans) == 1 && spans[0] == row {
				if !strings.HasPrefix(r[1], typ) {
					t.Fatalf("docs/keys.md: row %s has type %q, want %s", row, r[1], typ)
				}
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("docs/keys.md's key table has no row %s", row)
	}
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !re.MatchString(k) {
			continue
		}
		if got := rdb.Type(ctx, k).Val(); got != typ {
			t.Fatalf("key %s (row %s) is a %s, want %s", k, row, got, typ)
		}
		if pttl := rdb.PTTL(ctx, k).Val(); pttl <= 0 {
			t.Fatalf("key %s (row %s) does not expire: PTTL %v", k, row, pttl)
		}
		return
	}
	t.Fatalf("no key matches %s (row %s) among %q", re, row, keys)
}

// Key returns the Redis key of the lock name under the default prefix, followed by each of parts
// after a colon: Key("job") is lockkit:{job}, Key("job", "released") its release channel,
// Key("job", "permits", "queue") a semaphore's queue. docs/keys.md is the schema; core's
// TestKeys_locktestKeyMatchesStore holds Key to the keys core computes.
func Key(name string, parts ...string) string {
	k := "lockkit:{" + name + "}"
	for _, p := range parts {
		k += ":" + p
	}
	return k
}
