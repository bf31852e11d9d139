package httpmw_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
	"github.com/redis/go-redis/v9"
)

// A Redis that refuses the lock for a configuration reason (a wrong password, an ACL user
// missing a grant) is no outage: both middlewares answer 500 lock-misconfigured, not 503 (which
// tells clients to retry), also with FailOpen, and log what Redis said.
func TestMisconfigured_answers500(t *testing.T) {
	srv := redistest.Start(t, redistest.WithACL("user app on >pw ~* &* +@all", "user nogrant on >pw ~* &* +@all -evalsha"))
	for _, tc := range []struct{ name, user, pass, says string }{
		{"wrong password", "app", "wrong", "WRONGPASS"},
		{"missing grant", "nogrant", "pw", "NOPERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := srv.Options()
			o.Username, o.Password = tc.user, tc.pass
			rdb := redis.NewClient(o)
			t.Cleanup(func() { _ = rdb.Close() })
			locks := locktest.NewClient(t, rdb)
			var logs logBuffer
			var calls atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
			for _, fail := range []httpmw.Option{httpmw.WithLogger(logs.logger()), httpmw.FailOpen()} {
				url := lockedAPI(t, locks, h, httpmw.WithLogger(logs.logger()), fail)
				wantProblem(t, send(t, "PUT", url+"/orders/1", "", ""), 500, "lock-misconfigured")
				url, _ = ordersAPI(t, locks, httpmw.WithLogger(logs.logger()), fail)
				wantProblem(t, send(t, "POST", url+"/orders", "k", ""), 500, "lock-misconfigured")
			}
			if calls.Load() != 0 || strings.Count(logs.String(), tc.says) != 4 {
				t.Fatalf("handler ran %d times; log:\n%s", calls.Load(), logs.String())
			}
		})
	}
}
