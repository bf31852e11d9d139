package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// demo calls a running server: concurrent withdrawals on one account, then idempotent retries.
func demo(ctx context.Context, addr, _ string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	account := fmt.Sprintf("demo-%d", time.Now().UnixNano()) // a fresh account on every run
	call := func(ctx context.Context, method string, req map[string]any, opts ...grpc.CallOption) (*structpb.Struct, error) {
		in, err := structpb.NewStruct(req)
		if err != nil {
			return nil, err
		}
		out := &structpb.Struct{}
		return out, conn.Invoke(ctx, method, in, out, opts...)
	}
	balance := func() (float64, error) {
		out, err := call(ctx, balanceMethod, map[string]any{"account": account})
		return out.GetFields()["balance"].GetNumberValue(), err
	}

	// 1. Twenty concurrent withdrawals of 1: each is a GET then SET, serialised by the lock.
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if _, err := call(ctx, withdrawMethod, map[string]any{"account": account, "amount": 1}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return fmt.Errorf("concurrent withdrawal: %w", err)
	}
	b, err := balance()
	if err != nil {
		return err
	}
	fmt.Printf("%d concurrent withdrawals of 1 from %d: balance %v\n", n, startBalance, b)
	if b != startBalance-n {
		return fmt.Errorf("lost updates: balance %v, want %d", b, startBalance-n)
	}

	// 2. A retried withdrawal with the same idempotency key is answered from the stored response.
	ictx := metadata.AppendToOutgoingContext(ctx, grpcmw.IdempotencyKeyHeader, "withdraw-5-"+account)
	for i := range 2 {
		var hdr metadata.MD
		out, err := call(ictx, withdrawMethod, map[string]any{"account": account, "amount": 5}, grpc.Header(&hdr))
		if err != nil {
			return err
		}
		fmt.Printf("withdraw 5, attempt %d: balance %v, replayed %v\n",
			i+1, out.GetFields()["balance"].GetNumberValue(), hdr.Get(grpcmw.ReplayedHeader))
	}
	if b, err = balance(); err != nil || b != startBalance-n-5 {
		return fmt.Errorf("balance after the retried withdrawal: %v %v, want %d", b, err, startBalance-n-5)
	}

	// 3. The same key with another request is refused.
	_, err = call(ictx, withdrawMethod, map[string]any{"account": account, "amount": 50})
	fmt.Printf("same key, amount 50: %v %q\n", status.Code(err), status.Convert(err).Message())
	if status.Code(err) != codes.InvalidArgument {
		return fmt.Errorf("reused key: %v, want InvalidArgument", err)
	}

	// 4. A refusal stored by WithStoredErrors is replayed, not re-run.
	fctx := metadata.AppendToOutgoingContext(ctx, grpcmw.IdempotencyKeyHeader, "withdraw-1000-"+account)
	for i := range 2 {
		_, err := call(fctx, withdrawMethod, map[string]any{"account": account, "amount": 1000})
		fmt.Printf("withdraw 1000, attempt %d: %v %q\n", i+1, status.Code(err), status.Convert(err).Message())
	}
	fmt.Println("ok")
	return nil
}
