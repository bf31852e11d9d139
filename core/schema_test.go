package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
)

// A client that meets a lock value of another key schema refuses it by that schema's number, for
// every kind of hold, and leaves the value as it found it (docs/keys.md, "Key schema versions"):
// a later schema's free and held values (the byte 3 where this schema writes the byte 2), and the
// held value of schema 1 (no version byte: NUL after W). Before the schema was named, each was
// "unexpected lock value (a key of an older lockkit version ...)", and nothing said which.
func TestKeySchema_otherSchemaRefusedByNumber(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	base := "0000000000000001"
	for _, v := range []struct{ schema, value string }{
		{"3", "\x03" + base + "\x007"},
		{"3", "tok\x007\x00h1\x000\x03" + base + "\x006\x001.5\x00host 1 x"},
		{"3", "\x01permits\x007\x00\x000\x03" + base + "\x006\x00\x00"},
		{"1", "tok\x007\x00h1\x000\x00" + base + "\x001.5\x00host 1 x"},
	} {
		if err := rdb.Set(ctx, "lockkit:{s}", v.value, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		for what, opts := range map[string][]core.AcquireOption{
			"lock": nil, "fair": {core.Fair()}, "read": {core.Read()}, "write": {core.Write()}, "permit": {core.Permits(2)},
		} {
			_, err := c.TryAcquire(ctx, "s", time.Second, opts...)
			want := "holds a value of key schema " + v.schema + ", this lockkit reads and writes key schema 2"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s on %q: %v, want an error with %q", what, v.value, err, want)
			}
		}
		if _, err := c.TryAcquireAll(ctx, []string{"r", "s"}, time.Second); err == nil ||
			!strings.Contains(err.Error(), "key schema "+v.schema) {
			t.Errorf("set on %q: %v, want an error naming key schema %s", v.value, err, v.schema)
		}
		if got := rdb.Get(ctx, "lockkit:{s}").Val(); got != v.value {
			t.Errorf("the value became %q, was %q", got, v.value)
		}
	}
}
