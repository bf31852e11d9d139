//lint:file-ignore SA1019 the deprecated names are kept for one release and must keep working

package grpcmw_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// WithKeyFunc and WithMetadataKey keep their order: the request's Keyer first, then the function,
// then the metadata (WithKey replaces the default instead).
func TestDeprecated_keyFuncAndMetadataKey_keepTheirOrder(t *testing.T) {
	var got atomic.Value // name of the lock the handler ran under, "" for none
	svc := &service{unary: func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		name := ""
		if l, ok := core.FromContext(ctx); ok {
			name = l.Name()
		}
		got.Store(name)
		return wrapperspb.String(name), nil
	}}
	keyFunc := func(ctx context.Context, fullMethod string, req any) (string, error) {
		in := req.(proto.Message)
		if s := in.(interface{ GetValue() string }).GetValue(); strings.HasPrefix(s, "fn:") {
			return "from-func/" + fullMethod, nil
		}
		return "", nil
	}
	e := setup(t, svc, 1, grpcmw.WithKeyFunc(keyFunc), grpcmw.WithMetadataKey("X-Account"))
	r := e.replicas[0]
	md := func(v ...string) context.Context {
		ctx := context.Background()
		for _, s := range v {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-account", s)
		}
		return ctx
	}
	for _, tc := range []struct {
		name          string
		ctx           context.Context
		method, value string
		want          string
	}{
		{"keyer first", md("acct-md"), keyedMethod, "fn:acct-keyer", "@grpc/fn:acct-keyer"},
		{"empty keyer falls to func", md("acct-md"), plainMethod, "fn:x", "@grpc/from-func/" + plainMethod},
		{"empty func falls to metadata", md("acct-md"), plainMethod, "x", "@grpc/acct-md"},
		{"no key passes through", md(), plainMethod, "x", ""},
		{"empty keyer and nothing else", md(), keyedMethod, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := r.call(tc.ctx, tc.method, tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.want {
				t.Fatalf("ran under lock %q, want %q", out, tc.want)
			}
		})
	}
	_, err := r.call(md("a", "b"), plainMethod, "x")
	wantCode(t, err, codes.InvalidArgument)
}

// UnaryOption is Option: a []UnaryOption of the previous release still configures both
// interceptors; the deprecated key options cannot be mixed with WithKey or WithKeys.
func TestDeprecated_unaryOptionAndKeyOptions(t *testing.T) {
	var opts []grpcmw.UnaryOption = []grpcmw.UnaryOption{grpcmw.WithMetadataKey("x-account"), grpcmw.WithWait(time.Second)}
	svc := &service{unary: echo}
	e := setup(t, svc, 1, opts...)
	holdLock(t, e, "acct-d", 5*time.Second)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-account", "acct-d")
	_, err := e.replicas[0].call(ctx, plainMethod, "x")
	wantCode(t, err, codes.Aborted)
	_ = grpcmw.StreamServerInterceptor(&core.Client{}, opts...)
	for name, opts := range map[string][]grpcmw.Option{
		"WithKey":  {grpcmw.WithKeyFunc(grpcmw.ByRequest()), grpcmw.WithKey(grpcmw.ByRequest())},
		"WithKeys": {grpcmw.WithMetadataKey("x"), grpcmw.WithKeys(grpcmw.Keys(grpcmw.ByRequest()))},
	} {
		err, _ := panicOf(func() { grpcmw.UnaryServerInterceptor(&core.Client{}, opts...) }).(error)
		if !errors.Is(err, core.ErrInvalid) {
			t.Errorf("deprecated key option with %s: panicked with %v, want ErrInvalid", name, err)
		}
	}
}
