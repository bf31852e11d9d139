package grpcmw_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A request message names its key by implementing grpcmw.Keyer. With generated code, add the method
// in a file of the same package:
//
//	func (r *WithdrawRequest) LockKey() string { return "account/" + r.GetAccountId() }
func ExampleUnaryServerInterceptor() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		// Calls for one account run one at a time across every replica; a second call waits up to
		// 2s, then fails with codes.Aborted and a RetryInfo.
		grpcmw.UnaryServerInterceptor(locks, grpcmw.WithWait(2*time.Second)),
	))
	_ = srv // register services, then srv.Serve(listener)
}

// Streaming calls take their key from metadata (ByMetadata), or a KeyFunc, which gets a nil request.
func ExampleStreamServerInterceptor() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	srv := grpc.NewServer(grpc.ChainStreamInterceptor(
		grpcmw.StreamServerInterceptor(locks, grpcmw.WithKey(grpcmw.ByMetadata("x-device-id"))),
	))
	_ = srv
}

// A KeyFunc derives the key from anything in the call; returning "" lets the call through unlocked.
// The interceptors are plain grpc interceptors, so go-grpc-middleware's selector can choose the
// methods instead of WithMethods:
//
//	selector.UnaryServerInterceptor(grpcmw.UnaryServerInterceptor(locks),
//		selector.MatchFunc(func(ctx context.Context, c interceptors.CallMeta) bool {
//			return c.Service == "bank.Accounts"
//		}))
func ExampleWithKey() {
	locks, err := core.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}))
	if err != nil {
		log.Fatal(err)
	}
	byTenant := func(ctx context.Context, fullMethod string, req any) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if t := md.Get("tenant"); len(t) == 1 {
			return "tenant/" + t[0], nil
		}
		return "", status.Error(codes.Unauthenticated, "no tenant")
	}
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(locks,
		grpcmw.WithKey(byTenant),
		grpcmw.WithMethods("/bank.Accounts/Withdraw", "/bank.Transfers/"),
	)))
}

// With WithIdempotency, a client that retries a call with the same idempotency-key metadata gets the
// first call's response instead of running it twice, whichever replica it reaches.
func ExampleWithIdempotency() {
	locks, err := core.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}))
	if err != nil {
		log.Fatal(err)
	}
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(locks,
		grpcmw.WithIdempotency(24*time.Hour),
		grpcmw.WithWait(5*time.Second), // a retry that races the first call waits for its response
	)))

	// On the client:
	ctx := metadata.AppendToOutgoingContext(context.Background(), grpcmw.IdempotencyKeyHeader, "3f8a6c1e")
	_ = ctx // conn.Invoke(ctx, ...) or client.Withdraw(ctx, req), retried with the same ctx
}

// A contended call fails at once (unless WithWait) with the configured code and a RetryInfo carrying
// the holder's remaining TTL; a client reads it to back off.
func ExampleWithContendedCode() {
	locks, err := core.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}))
	if err != nil {
		log.Fatal(err)
	}
	_ = grpcmw.UnaryServerInterceptor(locks, grpcmw.WithContendedCode(codes.ResourceExhausted))

	// On the client, after a failed call:
	retryAfter := func(err error) (time.Duration, bool) {
		for _, d := range status.Convert(err).Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				return ri.GetRetryDelay().AsDuration(), true
			}
		}
		return 0, false
	}
	var callErr error // from conn.Invoke or a generated client
	if d, ok := retryAfter(callErr); ok {
		fmt.Println("busy; retry in", d)
	}
}

// WithLimit turns the per-key lock into a per-key concurrency limit.
func ExampleWithLimit() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		// At most 4 calls per tenant at once across every replica (key from the "x-tenant"
		// metadata); a 5th fails with codes.ResourceExhausted and a RetryInfo.
		grpcmw.UnaryServerInterceptor(locks, grpcmw.WithLimit(4), grpcmw.WithKey(grpcmw.ByMetadata("x-tenant"))),
	))
	_ = srv // register services, then srv.Serve(listener)
}

// WithKeys locks several keys per call, all or nothing: a transfer locks both accounts, and two
// transfers between the same accounts in opposite directions never deadlock. With generated code,
// the request names its accounts:
//
//	func(ctx context.Context, fullMethod string, req any) ([]string, error) {
//		t := req.(*bankpb.TransferRequest)
//		return []string{"account/" + t.GetFrom(), "account/" + t.GetTo()}, nil
//	}
func ExampleWithKeys() {
	var locks *core.Client // from core.New
	accounts := grpcmw.Keys(grpcmw.ByMetadata("x-from-account"), grpcmw.ByMetadata("x-to-account"))
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(locks,
		grpcmw.WithKeys(accounts),
		grpcmw.WithWait(2*time.Second), // a transfer waits for both accounts, holding neither
		grpcmw.WithMethods("/bank.Transfers/Transfer"),
	)))
	_ = srv
}

// WithReadWrite lets the read-only calls of an account run together; the others run alone.
func ExampleWithReadWrite() {
	var locks *core.Client // from core.New
	readOnly := map[string]bool{"/bank.Accounts/GetBalance": true, "/bank.Accounts/ListTransfers": true}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		grpcmw.UnaryServerInterceptor(locks, grpcmw.WithWait(2*time.Second),
			grpcmw.WithReadWrite(func(fullMethod string) bool { return readOnly[fullMethod] })),
	))
	_ = srv // register services, then srv.Serve(listener)
}
