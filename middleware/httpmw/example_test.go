package httpmw_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/middleware/httpmw"
	"github.com/redis/go-redis/v9"
)

// The examples need a Redis server, so they only compile.

func ExampleIdempotency() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Runs once per Idempotency-Key, whatever the number of retries and replicas.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"ord_1"}`)
	})
	idem := httpmw.Idempotency(locks,
		httpmw.RequireKey(),                       // 400 without a key
		httpmw.WithWait(10*time.Second),           // duplicates wait for the first response
		httpmw.WithLogger(slog.Default()),         // responses that could not be stored
		httpmw.WithFingerprintHeaders("X-Tenant"), // part of the request's identity
	)
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idem(createOrder))
	log.Fatal(http.ListenAndServe(":8080", mux))
}

func ExampleKeyLock() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	updateAccount := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One request per account at a time, across replicas. The lock's fencing token lets the
		// storage reject a write from a holder that lost the lock.
		l, _ := core.FromContext(r.Context())
		fmt.Fprintf(w, "updated %s under fence %d", l.Name(), l.Fence())
	})
	perAccount := httpmw.KeyLock(locks, httpmw.PathValue("id"), httpmw.WithWait(2*time.Second))
	mux := http.NewServeMux()
	mux.Handle("PUT /accounts/{id}", perAccount(updateAccount))
	log.Fatal(http.ListenAndServe(":8080", mux))
}

// A KeyFunc can validate the key and give it a namespace, so that account 42 and order 42 do not
// share a lock.
func ExampleKeyFunc() {
	var locks *core.Client // from core.New
	orderKey := func(r *http.Request) (string, error) {
		id := r.PathValue("id")
		if len(id) != 8 {
			return "", fmt.Errorf("order id %q is not 8 characters", id)
		}
		return "order/" + id, nil
	}
	mux := http.NewServeMux()
	mux.Handle("DELETE /orders/{id}", httpmw.KeyLock(locks, orderKey)(http.NotFoundHandler()))
}
