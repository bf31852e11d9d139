package grpcmw_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc/codes"
)

// An argument that would be read as something else — a nil function as the default, no method as
// every method, a method no call has, a code gRPC does not define — is refused at construction,
// naming the option.
func TestOptions_outOfRangeArgumentsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		want string
		opt  grpcmw.Option
	}{
		{"lockkit: grpcmw: WithIdempotencyScope(nil)", grpcmw.WithIdempotencyScope(nil)},
		{"lockkit: grpcmw: WithKeyFunc(nil)", grpcmw.WithKeyFunc(nil)},
		{`lockkit: grpcmw: WithMetadataKey("")`, grpcmw.WithMetadataKey("")},
		{"lockkit: grpcmw: WithMethods needs at least one method", grpcmw.WithMethods()},
		{`lockkit: grpcmw: WithMethods("")`, grpcmw.WithMethods("/a.B/C", "")},
		{`lockkit: grpcmw: WithMethods("a.B/C")`, grpcmw.WithMethods("a.B/C")},
		{`lockkit: grpcmw: WithMethods("/")`, grpcmw.WithMethods("/")},
		{"lockkit: grpcmw: WithContendedCode(17) is not a gRPC status code", grpcmw.WithContendedCode(17)},
		{"lockkit: grpcmw: WithStoredErrors(99) is not a gRPC status code", grpcmw.WithStoredErrors(codes.NotFound, 99)},
	} {
		err, _ := panicOf(func() { grpcmw.UnaryServerInterceptor(&core.Client{}, tc.opt) }).(error)
		if !errors.Is(err, core.ErrInvalid) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("panicked with %v, want %q matching core.ErrInvalid", err, tc.want)
		}
	}
	for _, opt := range []grpcmw.Option{grpcmw.WithMethods("/a.B/C", "/a.D/"), grpcmw.WithContendedCode(codes.Unauthenticated),
		grpcmw.WithStoredErrors(codes.NotFound)} {
		if p := panicOf(func() { grpcmw.UnaryServerInterceptor(&core.Client{}, opt) }); p != nil {
			t.Errorf("a valid option panicked with %v", p)
		}
	}
}
