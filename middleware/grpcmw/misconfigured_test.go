package grpcmw_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A Redis that refuses the lock for a configuration reason (a wrong password, an ACL user missing
// a grant) gives codes.Internal, not codes.Unavailable (which clients retry), with and without
// idempotent replay; the logger gets what Redis said.
func TestMisconfigured_internal(t *testing.T) {
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
			var logs bytes.Buffer
			lg := grpcmw.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
			info := &grpc.UnaryServerInfo{FullMethod: keyedMethod}
			ran := false
			handler := func(ctx context.Context, req any) (any, error) { ran = true; return req, nil }
			req := keyed{wrapperspb.String("acct-m")}
			_, err := grpcmw.UnaryServerInterceptor(locks, lg)(context.Background(), req, info, handler)
			st := wantCode(t, err, codes.Internal)
			idem := grpcmw.UnaryServerInterceptor(locks, lg, grpcmw.WithIdempotency(time.Hour))
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(grpcmw.IdempotencyKeyHeader, "k1"))
			_, err = idem(ctx, req, info, handler)
			wantCode(t, err, codes.Internal)
			if ran || strings.Contains(st.Message(), tc.says) || strings.Count(logs.String(), tc.says) != 2 {
				t.Fatalf("handler ran: %v; status %q; log:\n%s", ran, st.Message(), logs.String())
			}
		})
	}
}
