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
	perAccount := httpmw.KeyLock(locks, httpmw.ByPathValue("id"), httpmw.WithWait(2*time.Second))
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

// principalKey is the context key under which this example's authentication stores the caller.
type principalKey struct{}

// WithScope with a principal ID: the authentication in front of the middleware resolved the caller
// to a stable user ID, which scopes the keys instead of the raw credentials. A bearer token changes
// when the client refreshes it; scoped by the token, a retry sent after a refresh would run the
// handler again. Scoped by the user ID, it replays.
func ExampleWithScope() {
	var locks *core.Client // from core.New
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user := "u-123" // look the bearer token or session up: the user it belongs to
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, user)))
		})
	}
	userID := func(r *http.Request) string {
		id, _ := r.Context().Value(principalKey{}).(string)
		return id // method and route are part of the scope whatever this returns
	}
	idem := httpmw.Idempotency(locks, httpmw.WithScope(userID))
	mux := http.NewServeMux()
	mux.Handle("POST /orders", authenticate(idem(http.NotFoundHandler())))
}

// Locks shared with another component on purpose: a gRPC method using grpcmw.WithNamespace("orders")
// and this route exclude each other on the same order ID. Without the option, KeyLock's locks live
// in their own namespace, out of reach of other components and of their clients.
func ExampleWithNamespace() {
	var locks *core.Client // from core.New
	mux := http.NewServeMux()
	mux.Handle("PUT /orders/{id}", httpmw.KeyLock(locks, httpmw.ByPathValue("id"),
		httpmw.WithNamespace("orders"))(http.NotFoundHandler()))
}

// WithLimit turns KeyLock's per-key lock into a per-key concurrency limit.
func ExampleWithLimit() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	export := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// At most 3 exports per tenant at once, across replicas; a 4th gets 429 with Retry-After.
		p, _ := core.FromContext(r.Context())
		fmt.Fprintf(w, "exporting under permit %d of %d", p.Fence(), p.Limit())
	})
	perTenant := httpmw.KeyLock(locks, httpmw.ByHeader("X-Tenant"), httpmw.WithLimit(3), httpmw.WithTTL(30*time.Second))
	mux := http.NewServeMux()
	mux.Handle("POST /exports", perTenant(export))
	log.Fatal(http.ListenAndServe(":8080", mux))
}

// A transfer locks both accounts, all or nothing: two transfers between the same accounts in
// opposite directions never deadlock, and a transfer never runs while either account is locked by
// another request (here it waits up to 2s for both, then gets 409).
func ExampleWithKeys() {
	var locks *core.Client // from core.New
	transfer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Both accounts are locked here; the context is cancelled if either lock is lost.
		fmt.Fprintf(w, "moved from %s to %s", r.PathValue("from"), r.PathValue("to"))
	})
	both := httpmw.KeyLock(locks, nil, httpmw.WithWait(2*time.Second),
		httpmw.WithKeys(httpmw.Keys(httpmw.ByPathValue("from"), httpmw.ByPathValue("to"))))
	mux := http.NewServeMux()
	mux.Handle("POST /transfers/{from}/{to}", both(transfer))
}

// Reads of a document run together; a write runs alone, and the reads that come after it wait.
func ExampleWithReadWrite() {
	var locks *core.Client // from core.New
	doc := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, _ := core.FromContext(r.Context())
		fmt.Fprintf(w, "%s under a %s hold, fence %d", r.Method, h.Mode(), h.Fence())
	})
	byID := httpmw.KeyLock(locks, httpmw.ByPathValue("id"), httpmw.WithReadWrite())
	mux := http.NewServeMux()
	mux.Handle("GET /docs/{id}", byID(doc)) // a read
	mux.Handle("PUT /docs/{id}", byID(doc)) // a write
}
