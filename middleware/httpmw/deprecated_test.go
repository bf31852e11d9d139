//lint:file-ignore SA1019 the deprecated names are kept for one release and must keep working

package httpmw_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// Code written against the previous release compiles and behaves as before: the option types
// (now aliases of Option), PathValue, Header, Query, Limit and WithLockTTL.
func TestDeprecated_namesStillWork(t *testing.T) {
	srv, locks := setup(t)
	var got []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, ok := core.FromContext(r.Context())
		if !ok {
			got = append(got, "-")
			return
		}
		got = append(got, fmt.Sprintf("%s/%d", l.Name(), l.Limit()))
	})
	var keyOpts []httpmw.KeyLockOption = []httpmw.KeyLockOption{httpmw.WithNamespace("orders"), httpmw.WithLockTTL(time.Second)}
	var idemOpts []httpmw.IdempotencyOption = []httpmw.IdempotencyOption{httpmw.RequireKey(), httpmw.WithTTL(time.Second)}
	mux := http.NewServeMux()
	mux.Handle("PUT /a/{id}", httpmw.KeyLock(locks, httpmw.PathValue("id"), keyOpts...)(h))
	mux.Handle("PUT /b", httpmw.KeyLock(locks, httpmw.Header("x-order"))(h))
	mux.Handle("PUT /c", httpmw.KeyLock(locks, httpmw.Query("order"))(h))
	mux.Handle("PUT /d", httpmw.Limit(locks, httpmw.Header("x-tenant"), 3, httpmw.WithWait(0))(h))
	mux.Handle("POST /e", httpmw.Idempotency(locks, idemOpts...)(h))
	url := serve(t, mux).URL
	send(t, "PUT", url+"/a/7", "", "")
	send(t, "PUT", url+"/b", "", "", "X-Order", "8")
	send(t, "PUT", url+"/c?order=9", "", "")
	send(t, "PUT", url+"/d", "", "", "X-Tenant", "t1")
	if want := "[@orders/7/0 @http/8/0 @http/9/0 @http/t1/3]"; fmt.Sprint(got) != want {
		t.Fatalf("locks held: %v, want %s", got, want)
	}
	wantProblem(t, send(t, "POST", url+"/e", "", ""), 400, "idempotency-key-missing")
	// WithLockTTL is WithTTL: the lock of /a lives a second.
	held := make(chan struct{})
	release := make(chan struct{})
	slow := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { close(held); <-release })
	mux.Handle("PUT /slow/{id}", httpmw.KeyLock(locks, httpmw.PathValue("id"), keyOpts...)(slow))
	done := make(chan struct{})
	go func() { defer close(done); _, _ = request("PUT", url+"/slow/s", "", "") }()
	<-held
	if ttl := srv.Do(t, "PTTL", locktest.Key("@orders/s")).(int64); ttl <= 0 || ttl > 1000 {
		t.Errorf("WithLockTTL(1s): PTTL %d", ttl)
	}
	close(release)
	<-done
	// Limit answers 429 when full, as before.
	p, err := locks.Acquire(context.Background(), "full", time.Minute, core.Permits(1), core.InNamespace("http"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(context.Background())
	mux.Handle("PUT /f", httpmw.Limit(locks, httpmw.Header("x-tenant"), 1)(h))
	wantProblem(t, send(t, "PUT", url+"/f", "", "", "X-Tenant", "full"), 429, "concurrency-limit")
}
