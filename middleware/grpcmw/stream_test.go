package grpcmw_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// withAccount returns a context sending the x-account metadata.
func withAccount(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-account", key)
}

func TestStream_sameKey_neverOverlaps_acrossServers(t *testing.T) {
	var inFlight, maxInFlight, runs atomic.Int64
	svc := &service{watch: func(in *wrapperspb.StringValue, ss grpc.ServerStream) error {
		l, ok := core.FromContext(ss.Context())
		if !ok || l.Name() != "@grpc/"+in.GetValue() {
			return status.Error(codes.Internal, "stream handler runs without the lock in its context")
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		runs.Add(1)
		for i := range 3 {
			if err := ss.SendMsg(wrapperspb.String(in.GetValue() + "#" + string(rune('0'+i)))); err != nil {
				return err
			}
			time.Sleep(200 * time.Microsecond) // work under the lock: a window for an overlap to show
		}
		return nil
	}}
	e := setup(t, svc, 2, grpcmw.WithKey(grpcmw.ByMetadata("x-account")), grpcmw.WithWait(10*time.Second))
	const streams = 20
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			got, err := e.replicas[i%2].watch(withAccount("acct-s"), "acct-s")
			if err == nil && strings.Join(got, ",") != "acct-s#0,acct-s#1,acct-s#2" {
				err = errors.New("stream got " + strings.Join(got, ","))
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if runs.Load() != streams || maxInFlight.Load() != 1 {
		t.Fatalf("runs %d (want %d), max in flight %d (want 1)", runs.Load(), streams, maxInFlight.Load())
	}
}

func TestStream_keyFunc_getsNilRequest_andNoKeyPassesThrough(t *testing.T) {
	var reqs []any
	var mu sync.Mutex
	keyFunc := func(ctx context.Context, fullMethod string, req any) (string, error) {
		mu.Lock()
		reqs = append(reqs, req)
		mu.Unlock()
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("tenant")) == 1 {
			return "tenant/" + md.Get("tenant")[0], nil
		}
		return "", nil
	}
	svc := &service{watch: func(in *wrapperspb.StringValue, ss grpc.ServerStream) error {
		name := "none"
		if l, ok := core.FromContext(ss.Context()); ok {
			name = l.Name()
		}
		return ss.SendMsg(wrapperspb.String(name))
	}}
	e := setup(t, svc, 1, grpcmw.WithKey(keyFunc))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "tenant", "t1")
	got, err := e.replicas[0].watch(ctx, "x")
	if err != nil || len(got) != 1 || got[0] != "@grpc/tenant/t1" {
		t.Fatalf("locked stream got %q, %v", got, err)
	}
	got, err = e.replicas[0].watch(context.Background(), "x")
	if err != nil || len(got) != 1 || got[0] != "none" {
		t.Fatalf("unkeyed stream got %q, %v", got, err)
	}
	if len(reqs) != 2 || reqs[0] != nil || reqs[1] != nil {
		t.Fatalf("key function saw requests %v, want two nils", reqs)
	}
}

func TestStream_contended_abortedWithRetryInfo(t *testing.T) {
	var runs atomic.Int64
	svc := &service{watch: func(in *wrapperspb.StringValue, ss grpc.ServerStream) error {
		runs.Add(1)
		return nil
	}}
	e := setup(t, svc, 1, grpcmw.WithKey(grpcmw.ByMetadata("x-account")))
	holdLock(t, e, "acct-sc", 5*time.Second)
	_, err := e.replicas[0].watch(withAccount("acct-sc"), "x")
	st := wantCode(t, err, codes.Aborted)
	if d := retryDelay(t, st); d <= 4*time.Second || d > 5*time.Second {
		t.Fatalf("RetryInfo delay %v, want (4s, 5s]", d)
	}
	if runs.Load() != 0 {
		t.Fatal("stream handler ran although the lock was held")
	}
}

func TestStream_lostLock_cancelsStreamContext(t *testing.T) {
	started := make(chan struct{})
	causes := make(chan error, 1)
	svc := &service{watch: func(in *wrapperspb.StringValue, ss grpc.ServerStream) error {
		close(started)
		select {
		case <-ss.Context().Done():
			causes <- context.Cause(ss.Context())
		case <-time.After(10 * time.Second):
			causes <- errors.New("stream context not cancelled")
		}
		return nil // a handler that ignores the loss
	}}
	e := setup(t, svc, 1, grpcmw.WithKey(grpcmw.ByMetadata("x-account")), grpcmw.WithTTL(300*time.Millisecond))
	done := make(chan error, 1)
	go func() {
		_, err := e.replicas[0].watch(withAccount("acct-sl"), "x")
		done <- err
	}()
	<-started
	if n := e.rdb.Del(context.Background(), locktest.Key("@grpc/acct-sl")).Val(); n != 1 {
		t.Fatalf("deleted %d lock keys, want 1", n)
	}
	if cause := <-causes; !errors.Is(cause, core.ErrLost) {
		t.Fatalf("stream context cause %v, want ErrLost", cause)
	}
	st := wantCode(t, <-done, codes.Aborted)
	if !strings.Contains(st.Message(), "lock lost") {
		t.Fatalf("message %q does not say the lock was lost", st.Message())
	}
}
