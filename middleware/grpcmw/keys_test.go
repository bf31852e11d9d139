package grpcmw_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
)

// The record of an idempotent call is the key docs/keys.md gives it (docs/keys_test.go, in the
// root module, cannot import this module): lockkit:idem:{@grpc-idem/HASH}, a string with a TTL.
func TestIdempotency_keysMatchDocs(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ic := grpcmw.UnaryServerInterceptor(locktest.NewClient(t, rdb), grpcmw.WithIdempotency(time.Hour))
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(grpcmw.IdempotencyKeyHeader, "k1"))
	resp, err := ic(ctx, wrapperspb.String("req"), &grpc.UnaryServerInfo{FullMethod: "/lockkit.test.Docs/Call"},
		func(context.Context, any) (any, error) { return wrapperspb.String("resp"), nil })
	if err != nil || resp.(*wrapperspb.StringValue).GetValue() != "resp" {
		t.Fatalf("grpcmw: %v %v", resp, err)
	}
	locktest.DocumentedKey(t, rdb, "lockkit:idem:{@grpc-idem/HASH}", "string",
		regexp.MustCompile(`^lockkit:idem:\{@grpc-idem/[0-9a-f]{64}\}$`))
}
