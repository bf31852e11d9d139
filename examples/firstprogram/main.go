// Command firstprogram is the first program of lockkit's README: a lock around a job, and an HTTP
// route whose requests for one account never run at once, on any replica. main_test.go tests both
// over an embedded Redis. Run it with `go run ./examples/firstprogram`.
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/lockkittest"
	"github.com/lockkit/lockkit/middleware/httpmw"
	"github.com/redis/go-redis/v9"
)

func main() {
	srv, err := lockkittest.StartServer() // an embedded Redis: give redis.NewClient your own instead
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	locks, err := core.New(redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true}))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	if err := rebuildIndex(context.Background(), locks); err != nil {
		log.Fatal(err)
	}
	api := httptest.NewServer(routes(locks)) // in a service: http.ListenAndServe(addr, routes(locks))
	defer api.Close()
	resp, err := http.Post(api.URL+"/accounts/42/deposit", "text/plain", nil)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("POST /accounts/42/deposit:", resp.Status)
}

// rebuildIndex runs on one replica at a time: Do waits for the lock, renews it while the work
// runs, and releases it at the end.
func rebuildIndex(ctx context.Context, locks *core.Client) error {
	return locks.Do(ctx, "index-rebuild", 10*time.Second, func(ctx context.Context) error {
		l, _ := core.FromContext(ctx)
		fmt.Println("rebuilding the index with fence", l.Fence()) // pass the fence to your store
		return nil
	})
}

// routes serialises the requests for one account: a second request for the same account while
// one runs gets 409 Conflict (httpmw.WithWait would make it wait instead).
func routes(locks *core.Client) http.Handler {
	mux := http.NewServeMux()
	deposit := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "deposited into account %s\n", r.PathValue("id"))
	})
	mux.Handle("POST /accounts/{id}/deposit", httpmw.KeyLock(locks, httpmw.ByPathValue("id"))(deposit))
	return mux
}
