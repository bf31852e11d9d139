package grpcmw_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// With WithReadWrite, read-only calls of one key run together over two replicas; a write waits
// for them and runs alone; a read sent while the write waits runs after it (arrival order); and a
// write that cannot wait fails with ABORTED.
func TestUnary_withReadWrite(t *testing.T) {
	inside := make(chan string, 8)
	unblock := make(chan struct{})
	svc := &service{unary: func(ctx context.Context, method string, in *wrapperspb.StringValue) (proto.Message, error) {
		l, ok := core.FromContext(ctx)
		if !ok || l.Name() != "@grpc/acct-1" {
			return nil, errors.New("handler runs without a hold")
		}
		inside <- method + " " + l.Mode()
		if in.GetValue() == "block" {
			<-unblock
		}
		return wrapperspb.String("ok"), nil
	}}
	opts := []grpcmw.Option{
		grpcmw.WithReadWrite(func(m string) bool { return m == plainMethod }),
		grpcmw.WithKey(func(context.Context, string, any) (string, error) { return "acct-1", nil }),
	}
	e := setup(t, svc, 2, append(opts, grpcmw.WithWait(10*time.Second))...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 8)
	call := func(r *replica, method, value string) {
		go func() {
			_, err := r.call(ctx, method, value)
			done <- err
		}()
	}
	next := func(what string) string {
		t.Helper()
		select {
		case s := <-inside:
			return s
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not run", what)
			return ""
		}
	}
	call(e.replicas[0], plainMethod, "block")
	call(e.replicas[1], plainMethod, "block")
	for range 2 {
		if got := next("a read"); got != plainMethod+" read" {
			t.Fatalf("ran %q, want a read", got)
		}
	}
	queued := func(n int64) func() bool {
		return func() bool { return e.srv.Do(t, "ZCARD", locktest.Key("@grpc/acct-1", "rw", "queue")) == n }
	}
	call(e.replicas[0], keyedMethod, "acct-1") // (its request names the key)
	locktest.Eventually(t, 5*time.Second, "the write to queue", queued(1))
	call(e.replicas[1], plainMethod, "y")
	locktest.Eventually(t, 5*time.Second, "the later read to queue behind it", queued(2))
	impatient := startReplica(t, e.srv, svc, nil, append(opts, grpcmw.WithWait(0))...)
	_, err := impatient.call(ctx, keyedMethod, "acct-1")
	wantCode(t, err, codes.Aborted)
	close(unblock)
	for _, want := range []string{keyedMethod + " write", plainMethod + " read"} {
		if got := next(want); got != want {
			t.Fatalf("ran %q, want %q (arrival order)", got, want)
		}
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestWithReadWrite_invalid(t *testing.T) {
	for name, opts := range map[string][]grpcmw.Option{
		"nil":   {grpcmw.WithReadWrite(nil)},
		"limit": {grpcmw.WithReadWrite(func(string) bool { return true }), grpcmw.WithLimit(2)},
		"keys": {grpcmw.WithReadWrite(func(string) bool { return true }),
			grpcmw.WithKeys(grpcmw.Keys(grpcmw.ByRequest()))},
	} {
		func() {
			defer func() {
				if err, _ := recover().(error); !errors.Is(err, core.ErrInvalid) {
					t.Errorf("%s: panicked with %v, want ErrInvalid", name, err)
				}
			}()
			grpcmw.UnaryServerInterceptor(&core.Client{}, opts...)
		}()
	}
}
