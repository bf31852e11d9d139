package asynqlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/jobs/asynqlock"
	"github.com/redis/go-redis/v9"
)

// Tasks of one customer run one at a time across every server; busy tasks are retried when the key
// is due free and do not use up their retries.
func ExampleMiddleware() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	mw, err := asynqlock.Middleware(locks, asynqlock.WithKey(asynqlock.ByJSONField("customer_id")))
	if err != nil {
		log.Fatal(err)
	}
	mux := asynq.NewServeMux()
	mux.Use(mw)
	mux.HandleFunc("invoice:send", func(ctx context.Context, t *asynq.Task) error {
		l, _ := core.FromContext(ctx) // the task's lock
		fmt.Println("sending with fencing token", l.Fence())
		return nil // ctx is cancelled if the lock is lost
	})
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		IsFailure:      asynqlock.IsFailure(nil),
		RetryDelayFunc: asynqlock.RetryDelayFunc(nil),
	})
	if err := srv.Run(mux); err != nil {
		log.Fatal(err)
	}
}

// Wait inside the handler for up to 5s when the key is busy, instead of failing the attempt.
func ExampleWithWait() {
	var locks *core.Client // from core.New
	mw, err := asynqlock.Middleware(locks,
		asynqlock.WithKey(asynqlock.ByHeader("tenant")),
		asynqlock.WithWait(5*time.Second),
		asynqlock.WithTTL(2*time.Second, 30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	asynq.NewServeMux().Use(mw)
}

// Only one report:build task runs at a time in the whole fleet.
func ExampleByType() {
	var locks *core.Client // from core.New
	mw, err := asynqlock.Middleware(locks, asynqlock.WithKey(asynqlock.ByType()))
	if err != nil {
		log.Fatal(err)
	}
	mux := asynq.NewServeMux()
	mux.Handle("report:build", mw(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })))
}

func ExampleByHeader() {
	key := asynqlock.ByHeader("tenant")
	t := asynq.NewTaskWithHeaders("sync", nil, map[string]string{"tenant": "acme"})
	k, _ := key(context.Background(), t)
	fmt.Println(k)
	// Output: acme
}

func ExampleByJSONField() {
	key := asynqlock.ByJSONField("order", "customer")
	t := asynq.NewTask("ship", []byte(`{"order":{"id":17,"customer":"c-42"}}`))
	k, _ := key(context.Background(), t)
	fmt.Println(k)
	// Output: c-42
}

// A KeyFunc of your own: one key per task type and customer.
func ExampleKeyFunc() {
	byCustomer := asynqlock.ByJSONField("customer_id")
	var key asynqlock.KeyFunc = func(ctx context.Context, t *asynq.Task) (string, error) {
		k, err := byCustomer(ctx, t)
		if k == "" || err != nil {
			return "", err
		}
		return t.Type() + ":" + k, nil
	}
	k, _ := key(context.Background(), asynq.NewTask("email", []byte(`{"customer_id":7}`)))
	fmt.Println(k)
	// Output: email:7
}

// Compose with the server's own predicate: busy keys are no failure, and neither is ErrRateLimited.
func ExampleIsFailure() {
	errRateLimited := errors.New("rate limited")
	isFailure := asynqlock.IsFailure(func(err error) bool { return !errors.Is(err, errRateLimited) })
	fmt.Println(isFailure(&asynqlock.KeyBusyError{Key: "k"}), isFailure(errRateLimited), isFailure(errors.New("boom")))
	// Output: false false true
}

// Compose with the server's own back-off: busy keys wait for the holder's TTL, failures back off.
func ExampleRetryDelayFunc() {
	backoff := func(n int, _ error, _ *asynq.Task) time.Duration { return time.Duration(n+1) * time.Minute }
	delay := asynqlock.RetryDelayFunc(backoff)
	busy := delay(0, &asynqlock.KeyBusyError{Key: "k", RetryAfter: 2 * time.Second}, nil)
	fmt.Println(busy >= 2*time.Second && busy < 3*time.Second, delay(0, errors.New("boom"), nil))
	// Output: true 1m0s
}

func ExampleKeyBusyError() {
	var err error = &asynqlock.KeyBusyError{Key: "c-42", RetryAfter: 800 * time.Millisecond}
	var kb *asynqlock.KeyBusyError
	if errors.Is(err, asynqlock.ErrKeyBusy) && errors.As(err, &kb) {
		fmt.Println("key", kb.Key, "is busy; retry in", kb.RetryAfter)
	}
	// Output: key c-42 is busy; retry in 800ms
}

// Up to 5 reports per customer run at once across every server; a 6th is retried when a permit is
// due free, without using up its retries.
func ExampleWithLimit() {
	var locks *core.Client // from core.New
	mw, err := asynqlock.Middleware(locks,
		asynqlock.WithKey(asynqlock.ByJSONField("customer_id")),
		asynqlock.WithLimit(5))
	if err != nil {
		log.Fatal(err)
	}
	_ = mw // mux.Use(mw), with IsFailure and RetryDelayFunc in the server's Config
}

// The limit can come from the task itself, here a header set when it was enqueued.
func ExampleWithLimitFunc() {
	var locks *core.Client // from core.New
	perTask := asynqlock.WithLimitFunc(func(_ context.Context, t *asynq.Task) int {
		if t.Type() == "report:large" {
			return 1
		}
		return 4
	})
	mw, err := asynqlock.Middleware(locks, asynqlock.WithKey(asynqlock.ByJSONField("customer_id")), perTask)
	if err != nil {
		log.Fatal(err)
	}
	_ = mw
}
