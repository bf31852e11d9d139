package grpcmw_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Two callers with different authorization metadata each get a run of their own.
func TestIdempotency_callersWithDifferentCredentialsDoNotShare(t *testing.T) {
	var runs atomic.Int64
	svc := &service{unary: counting(&runs, func(context.Context) error { return nil })}
	e := setup(t, svc, 1, grpcmw.WithIdempotency(time.Minute))
	r := e.replicas[0]
	alice := metadata.AppendToOutgoingContext(withIdem("pay-1"), "authorization", "Bearer alice")
	mallory := metadata.AppendToOutgoingContext(withIdem("pay-1"), "authorization", "Bearer mallory")
	a, err := r.call(alice, plainMethod, "100 EUR")
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.call(mallory, plainMethod, "100 EUR")
	if err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 2 || a == m {
		t.Fatalf("runs %d: alice %q, mallory %q (mallory got alice's response)", runs.Load(), a, m)
	}
	if again, _ := r.call(alice, plainMethod, "100 EUR"); again != a || runs.Load() != 2 {
		t.Fatalf("alice's retry: %q, runs %d", again, runs.Load())
	}
}

// A scope function adds to the method: one method never replays another's response.
func TestIdempotency_scopeAddsToTheMethod(t *testing.T) {
	var runs atomic.Int64
	svc := &service{unary: counting(&runs, func(context.Context) error { return nil })}
	tenant := func(context.Context, string) (string, error) { return "tenant-1", nil }
	e := setup(t, svc, 1, grpcmw.WithIdempotency(time.Minute), grpcmw.WithIdempotencyScope(tenant))
	r := e.replicas[0]
	if _, err := r.call(withIdem("k"), plainMethod, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.call(withIdem("k"), keyedMethod, ""); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 2 {
		t.Fatalf("runs %d, want one per method", runs.Load())
	}
}

// Codes that ask for a retry cannot be stored; asking for it is an invalid option.
func TestWithStoredErrors_retryCodesRefused(t *testing.T) {
	e := setup(t, &service{}, 0)
	locks := locktest.NewClient(t, e.srv.Client(t))
	for _, c := range []codes.Code{codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded,
		codes.Internal, codes.Unknown, codes.Canceled, codes.OK} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, core.ErrInvalid) {
					t.Errorf("WithStoredErrors(%v): panic %v, want ErrInvalid", c, err)
				}
			}()
			grpcmw.UnaryServerInterceptor(locks, grpcmw.WithIdempotency(time.Minute), grpcmw.WithStoredErrors(c))
		}()
	}
}

// Status messages carry no Redis error, node address or key; the logger gets the details.
func TestStatus_genericMessages(t *testing.T) {
	var logs locktest.SyncBuffer
	started := make(chan struct{})
	release := make(chan struct{})
	svc := &service{unary: func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		if in.GetValue() == "slow" {
			close(started)
			<-release
		}
		return wrapperspb.String("ok"), nil
	}}
	e := setup(t, svc, 1, grpcmw.WithIdempotency(time.Minute), grpcmw.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	r := e.replicas[0]
	done := make(chan error, 1)
	go func() { _, err := r.call(withIdem("secret-idem-key"), plainMethod, "slow"); done <- err }()
	<-started
	_, err := r.call(withIdem("secret-idem-key"), plainMethod, "slow")
	st := wantCode(t, err, codes.Aborted)
	if strings.Contains(st.Message(), "secret-idem-key") {
		t.Fatalf("in-flight message %q names the idempotency key", st.Message())
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	addr := e.srv.Options().Addr
	e.srv.Stop(t)
	for _, ctx := range []context.Context{withIdem("k2"), metadata.AppendToOutgoingContext(context.Background())} {
		_, err := r.call(ctx, keyedMethod, "secret-account")
		st := wantCode(t, err, codes.Unavailable)
		for _, leak := range []string{addr, "secret-account", "k2", "dial", "redis:", "connect"} {
			if strings.Contains(st.Message(), leak) {
				t.Fatalf("message %q carries %q", st.Message(), leak)
			}
		}
	}
	if l := logs.String(); !strings.Contains(l, "lock unavailable") || !strings.Contains(l, "error=") {
		t.Fatalf("log: %s", l)
	}
}

// A response over WithMaxBody is returned but not stored, and logged.
func TestIdempotency_responseSizeCap(t *testing.T) {
	var runs atomic.Int64
	var logs locktest.SyncBuffer
	svc := &service{unary: func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		runs.Add(1)
		return wrapperspb.String(strings.Repeat("x", 100)), nil
	}}
	e := setup(t, svc, 1, grpcmw.WithIdempotency(time.Minute), grpcmw.WithMaxBody(64),
		grpcmw.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	r := e.replicas[0]
	for range 2 {
		if out, err := r.call(withIdem("big"), plainMethod, ""); err != nil || len(out) != 100 {
			t.Fatalf("%d bytes, %v", len(out), err)
		}
	}
	if runs.Load() != 2 || !strings.Contains(logs.String(), "response not stored: response larger than the body limit") {
		t.Fatalf("runs %d, log %s", runs.Load(), logs.String())
	}
}
