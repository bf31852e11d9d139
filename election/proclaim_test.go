package election

import (
	"context"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// proclaim.lua records the leader's value whatever W the lock's value carries: 0 becomes 1 (the
// leader's release must publish), and a 2 (a waiter of another kind flagged the name) stays. A W
// of 2 used to make the script fail on a nil concatenation.
func TestProclaim_keepsOrRaisesW(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(srv.Options())
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	var key, tok = locktest.Key("@election/x"), "tok"
	held := func(w string) string {
		return tok + "\x00" + "1700000000000000\x001\x00" + w + "\x020000000000000001\x00" + "17\x001700000000000\x00label"
	}
	for _, tc := range []struct{ w, want string }{{"0", "1"}, {"1", "1"}, {"2", "2"}} {
		if err := rdb.Set(ctx, key, held(tc.w), 0).Err(); err != nil {
			t.Fatal(err)
		}
		n, err := rdb.Eval(ctx, proclaimLua, []string{key}, tok, "leader-value", 1700000000000000, "PUBLISH").Int()
		if err != nil || n != 1 {
			t.Fatalf("W %s: proclaim = %d, %v", tc.w, n, err)
		}
		if got, want := rdb.Get(ctx, key).Val(), held(tc.want)+"\x00leader-value"; got != want {
			t.Errorf("W %s: value %q, want %q", tc.w, got, want)
		}
	}
}
