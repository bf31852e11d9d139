package grpcmw_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// echo is a unary handler that returns its input.
func echo(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
	return wrapperspb.String(in.GetValue()), nil
}

func TestUnary_sameKey_neverOverlaps_acrossServers(t *testing.T) {
	var inFlight, maxInFlight, runs atomic.Int64
	svc := &service{unary: func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		if l, ok := core.FromContext(ctx); !ok || l.Name() != "@grpc/"+in.GetValue() {
			return nil, status.Error(codes.Internal, "handler runs without the lock")
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		runs.Add(1)
		time.Sleep(time.Millisecond) // the work under the lock: a window for an overlap to show
		return wrapperspb.String("ok"), nil
	}}
	e := setup(t, svc, 2, grpcmw.WithWait(10*time.Second))
	ctx := context.Background()
	const callers, calls = 16, 3
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls)
	for i := range callers {
		wg.Go(func() {
			for range calls {
				if _, err := e.replicas[i%2].call(ctx, keyedMethod, "acct-1"); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if runs.Load() != callers*calls || maxInFlight.Load() != 1 {
		t.Fatalf("runs %d (want %d), max in flight %d (want 1)", runs.Load(), callers*calls, maxInFlight.Load())
	}
}

func TestUnary_differentKeys_runInParallel(t *testing.T) {
	arrived := make(chan string, 2)
	proceed := make(chan struct{})
	svc := &service{unary: func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		arrived <- in.GetValue()
		select {
		case <-proceed: // both handlers are inside their critical sections at once
			return wrapperspb.String(in.GetValue()), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	e := setup(t, svc, 2) // fail fast: a wrongly shared lock makes the second call fail
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, key := range []string{"acct-a", "acct-b"} {
		wg.Go(func() {
			if _, err := e.replicas[i].call(ctx, keyedMethod, key); err != nil {
				errs <- err
			}
		})
	}
	for range 2 {
		select {
		case <-arrived:
		case err := <-errs:
			t.Fatalf("a call failed before both handlers ran: %v", err)
		case <-ctx.Done():
			t.Fatal("the two handlers never ran at the same time")
		}
	}
	close(proceed)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestUnary_contended_failsFastWithRetryInfo(t *testing.T) {
	var runs atomic.Int64
	svc := &service{unary: func(ctx context.Context, m string, in *wrapperspb.StringValue) (proto.Message, error) {
		runs.Add(1)
		return echo(ctx, m, in)
	}}
	for _, tc := range []struct {
		name string
		opts []grpcmw.Option
		code codes.Code
	}{
		{"default", nil, codes.Aborted},
		{"custom code", []grpcmw.Option{grpcmw.WithContendedCode(codes.ResourceExhausted)}, codes.ResourceExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, svc, 1, tc.opts...)
			holdLock(t, e, "acct-9", 5*time.Second)
			var trailer metadata.MD
			start := time.Now()
			_, err := e.replicas[0].call(context.Background(), keyedMethod, "acct-9", grpc.Trailer(&trailer))
			st := wantCode(t, err, tc.code)
			if d := retryDelay(t, st); d <= 4*time.Second || d > 5*time.Second {
				t.Fatalf("RetryInfo delay %v, want the holder's remaining TTL (4s, 5s]", d)
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("fail-fast call took %v", time.Since(start))
			}
			if p := trailer.Get("grpc-retry-pushback-ms"); len(p) != 1 || len(p[0]) != 4 {
				t.Fatalf("pushback trailer %q, want a delay of 4 digits in ms", p)
			}
			if strings.Contains(st.Message(), "acct-9") {
				t.Fatalf("message %q names the key", st.Message())
			}
			if runs.Load() != 0 {
				t.Fatal("the handler ran although the lock was held")
			}
		})
	}
}

func TestUnary_wait_getsLockOnRelease(t *testing.T) {
	svc := &service{unary: echo}
	e := setup(t, svc, 1, grpcmw.WithWait(10*time.Second))
	held := holdLock(t, e, "acct-w", 30*time.Second)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := e.replicas[0].call(context.Background(), keyedMethod, "acct-w")
		done <- err
	}()
	locktest.Eventually(t, 5*time.Second, "the call to wait on the release channel",
		func() bool { return subscribers(t, e.rdb, "acct-w") > 0 })
	select {
	case err := <-done:
		t.Fatalf("call returned while the lock was held: %v", err)
	default:
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("waiting call took %v: not woken by the release", time.Since(start))
	}
}

func TestUnary_wait_boundExpires(t *testing.T) {
	e := setup(t, &service{unary: echo}, 1, grpcmw.WithWait(100*time.Millisecond))
	holdLock(t, e, "acct-x", 30*time.Second)
	start := time.Now()
	_, err := e.replicas[0].call(context.Background(), keyedMethod, "acct-x")
	st := wantCode(t, err, codes.Aborted)
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Fatalf("gave up after %v, before the 100ms wait bound", el)
	}
	if d := retryDelay(t, st); d <= 20*time.Second {
		t.Fatalf("RetryInfo delay %v, want the holder's remaining TTL", d)
	}
}

func TestUnary_lostLock_cancelsHandler_andFailsTheCall(t *testing.T) {
	started := make(chan struct{})
	causes := make(chan error, 1)
	svc := &service{unary: func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		close(started)
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
		case <-time.After(10 * time.Second):
			causes <- errors.New("handler context not cancelled")
		}
		return wrapperspb.String("done anyway"), nil // a handler that ignores the loss
	}}
	e := setup(t, svc, 1, grpcmw.WithTTL(300*time.Millisecond))
	done := make(chan error, 1)
	go func() {
		_, err := e.replicas[0].call(context.Background(), keyedMethod, "acct-lost")
		done <- err
	}()
	<-started
	if n := e.rdb.Del(context.Background(), locktest.Key("@grpc/acct-lost")).Val(); n != 1 {
		t.Fatalf("deleted %d lock keys, want 1", n)
	}
	if cause := <-causes; !errors.Is(cause, core.ErrLost) {
		t.Fatalf("handler context cause %v, want ErrLost", cause)
	}
	st := wantCode(t, <-done, codes.Aborted)
	if !strings.Contains(st.Message(), "lock lost") {
		t.Fatalf("message %q does not say the lock was lost", st.Message())
	}
}

func TestUnary_withMethods(t *testing.T) {
	svc := &service{unary: func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		_, locked := core.FromContext(ctx)
		return wrapperspb.String(fmt.Sprint(locked)), nil
	}}
	opt := grpcmw.WithKey(grpcmw.ByMetadata("x-account"))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-account", "acct-m")
	e := setup(t, svc, 0)
	for _, tc := range []struct {
		methods      []string
		keyed, plain string
	}{
		{[]string{keyedMethod}, "true", "false"},
		{[]string{"/" + svcName + "/"}, "true", "true"},
		{[]string{"/other.Service/"}, "false", "false"},
	} {
		r := startReplica(t, e.srv, svc, nil, opt, grpcmw.WithMethods(tc.methods...))
		k, err1 := r.call(ctx, keyedMethod, "acct-m")
		p, err2 := r.call(ctx, plainMethod, "x")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if k != tc.keyed || p != tc.plain {
			t.Fatalf("WithMethods(%q): Keyed locked %s, Plain locked %s; want %s, %s", tc.methods, k, p, tc.keyed, tc.plain)
		}
	}
}

func TestUnary_errorCodes(t *testing.T) {
	svc := &service{unary: echo}
	keyFunc := func(ctx context.Context, method string, req any) (string, error) {
		if k, _ := grpcmw.ByRequest()(ctx, method, req); k != "" {
			return k, nil
		}
		switch req.(*wrapperspb.StringValue).GetValue() {
		case "plain-error":
			return "", errors.New("no account in request")
		case "status-error":
			return "", status.Error(codes.PermissionDenied, "not yours")
		}
		return "", nil
	}
	e := setup(t, svc, 1, grpcmw.WithKey(keyFunc))
	r := e.replicas[0]
	ctx := context.Background()
	for _, tc := range []struct {
		method, value string
		code          codes.Code
	}{
		{keyedMethod, strings.Repeat("k", 2000), codes.InvalidArgument},
		{plainMethod, "plain-error", codes.InvalidArgument},
		{plainMethod, "status-error", codes.PermissionDenied},
	} {
		_, err := r.call(ctx, tc.method, tc.value)
		wantCode(t, err, tc.code)
	}
	e.srv.Stop(t)
	_, err := r.call(ctx, keyedMethod, "acct-down")
	wantCode(t, err, codes.Unavailable)
}

// The context errors of a wait are mapped by the server (a client sees its own deadline whatever the
// server answers), so the interceptor is called directly here.
func TestUnary_contextErrors_andClosedClient(t *testing.T) {
	e := setup(t, &service{unary: echo}, 0)
	locks := locktest.NewClient(t, e.srv.Client(t))
	ic := grpcmw.UnaryServerInterceptor(locks, grpcmw.WithWait(10*time.Second))
	holdLock(t, e, "acct-c", 30*time.Second)
	info := &grpc.UnaryServerInfo{FullMethod: keyedMethod}
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }
	req := keyed{wrapperspb.String("acct-c")}

	dctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := ic(dctx, req, info, handler)
	wantCode(t, err, codes.DeadlineExceeded)

	cctx, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel2)
	_, err = ic(cctx, req, info, handler)
	wantCode(t, err, codes.Canceled)

	if err := locks.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = ic(context.Background(), keyed{wrapperspb.String("acct-free")}, info, handler)
	wantCode(t, err, codes.Unavailable)
}

func TestUnary_panicReleasesTheLock(t *testing.T) {
	svc := &service{unary: func(context.Context, string, *wrapperspb.StringValue) (proto.Message, error) {
		panic("boom")
	}}
	e := setup(t, svc, 1)
	_, err := e.replicas[0].call(context.Background(), keyedMethod, "acct-p")
	wantCode(t, err, codes.Internal)
	if locktest.Held(t, e.rdb, locktest.Key("@grpc/acct-p")) {
		t.Fatal("the lock is still held after the handler panicked")
	}
}

// The request context flows through core's hook into the handler: a span started in the hook (here
// a context value) is the parent of the handler's work, and the call's metadata is still there.
func TestUnary_hookContextFlowsToHandler(t *testing.T) {
	type spanKey struct{}
	type seen struct{ span, md string }
	seenc := make(chan seen, 1)
	svc := &service{unary: func(ctx context.Context, m string, in *wrapperspb.StringValue) (proto.Message, error) {
		span, _ := ctx.Value(spanKey{}).(string)
		md, _ := metadata.FromIncomingContext(ctx)
		seenc <- seen{span, strings.Join(md.Get("x-request"), ",")}
		return echo(ctx, m, in)
	}}
	e := setup(t, svc, 0)
	hook := core.Hook{WaitStart: func(ctx context.Context, info core.WaitInfo) context.Context {
		md, _ := metadata.FromIncomingContext(ctx)
		return context.WithValue(ctx, spanKey{}, info.Name+"/"+strings.Join(md.Get("x-request"), ","))
	}}
	r := startReplica(t, e.srv, svc, []core.Option{core.WithHook(hook)})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request", "r-1")
	if _, err := r.call(ctx, keyedMethod, "acct-h"); err != nil {
		t.Fatal(err)
	}
	if s := <-seenc; s.span != "@grpc/acct-h/r-1" || s.md != "r-1" {
		t.Fatalf("handler saw span %q and metadata %q", s.span, s.md)
	}
}
