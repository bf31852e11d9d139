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

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// transferKeys reads the accounts of a transfer from the request ("A,B"), as a generated client's
// TransferRequest{From, To} would give them.
func transferKeys() grpcmw.Option {
	return grpcmw.WithKeys(func(_ context.Context, _ string, req any) ([]string, error) {
		v, ok := req.(*wrapperspb.StringValue)
		if !ok {
			return nil, nil
		}
		return strings.Split(v.GetValue(), ","), nil
	})
}

// accounts checks, inside a handler, that the call holds the lock of each of its accounts in Redis
// and that no other call is inside for any of them.
type accounts struct {
	e      *env
	mu     sync.Mutex
	inside map[string]bool
	runs   atomic.Int64
}

func (a *accounts) handler(t *testing.T) func(context.Context, string, *wrapperspb.StringValue) (proto.Message, error) {
	return func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		names := strings.Split(in.GetValue(), ",")
		a.mu.Lock()
		for _, n := range names {
			if a.inside[n] {
				a.mu.Unlock()
				return nil, fmt.Errorf("two calls inside for account %s", n)
			}
		}
		for _, n := range names {
			a.inside[n] = true
		}
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			for _, n := range names {
				delete(a.inside, n)
			}
		}()
		for _, n := range names {
			if !locktest.Held(t, a.e.rdb, "lockkit:{@grpc/"+n+"}") {
				return nil, fmt.Errorf("account %s is not locked in Redis", n)
			}
		}
		if ctx.Err() != nil {
			return nil, errors.New("the set's context ended while the handler ran")
		}
		a.runs.Add(1)
		time.Sleep(time.Millisecond) // the work: an overlapping call would be seen above
		return wrapperspb.String("ok"), nil
	}
}

// Transfers in both directions between accounts, sent at once over two replicas: every one runs
// holding all of its accounts (in Redis, inside the handler), never while another call is inside
// for one of them, and none deadlocks.
func TestUnary_withKeys_transfersInOppositeDirectionsNeverDeadlock(t *testing.T) {
	a := &accounts{inside: map[string]bool{}}
	svc := &service{}
	e := setup(t, svc, 2, transferKeys(), grpcmw.WithWait(time.Minute))
	a.e = e
	svc.unary = a.handler(t)
	transfers := []string{"A,B", "B,A", "B,C", "C,A", "A,C"}
	const n = 40
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		go func() {
			<-start
			_, err := e.replicas[i%2].call(ctx, plainMethod, transfers[i%len(transfers)])
			errs <- err
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err) // a deadlock ends here with DeadlineExceeded
		}
	}
	if a.runs.Load() != n {
		t.Fatalf("%d transfers ran, want %d", a.runs.Load(), n)
	}
}

// A transfer whose accounts are partly held: without a wait it fails at once with codes.Aborted
// and a RetryInfo, taking nothing; with a wait it waits holding nothing, and runs once the held
// account is released.
func TestUnary_withKeys_partlyHeld(t *testing.T) {
	a := &accounts{inside: map[string]bool{}}
	svc := &service{}
	e := setup(t, svc, 1, transferKeys())
	a.e = e
	svc.unary = a.handler(t)
	patient := startReplica(t, e.srv, svc, nil, transferKeys(), grpcmw.WithWait(30*time.Second))
	ctx := context.Background()
	if _, err := e.replicas[0].call(ctx, plainMethod, "X,Y"); err != nil { // loads the scripts
		t.Fatal(err)
	}
	held := holdLock(t, e, "B", 5*time.Second)
	e.srv.ResetStats(t)
	_, err := e.replicas[0].call(ctx, plainMethod, "A,B")
	st := wantCode(t, err, codes.Aborted)
	if d := retryDelay(t, st); d <= 4*time.Second || d > 5*time.Second {
		t.Fatalf("RetryInfo delay %v, want the held account's remaining TTL", d)
	}
	if n := e.srv.CommandStats(t)["evalsha"]; n != 1 {
		t.Fatalf("refusing a partly held set took %d scripts, want 1", n)
	}
	if locktest.Held(t, e.rdb, locktest.Key("@grpc/A")) {
		t.Fatal("the refused transfer left account A locked")
	}
	done := make(chan error, 1)
	go func() {
		_, err := patient.call(ctx, plainMethod, "A,B")
		done <- err
	}()
	locktest.Eventually(t, 5*time.Second, "the transfer to wait for account B", func() bool {
		return subscribers(t, e.rdb, "B") > 0
	})
	if locktest.Held(t, e.rdb, locktest.Key("@grpc/A")) {
		t.Fatal("a waiting transfer holds account A")
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || a.runs.Load() != 2 {
		t.Fatalf("waiting transfer: %v, runs %d", err, a.runs.Load())
	}
}

// A set whose lock is lost while the handler runs cancels the handler's context, and the call
// fails with codes.Aborted.
func TestUnary_withKeys_lostLockAbortsTheCall(t *testing.T) {
	inside := make(chan struct{})
	svc := &service{unary: func(ctx context.Context, _ string, _ *wrapperspb.StringValue) (proto.Message, error) {
		close(inside)
		<-ctx.Done()
		return wrapperspb.String("done"), nil
	}}
	e := setup(t, svc, 1, transferKeys(), grpcmw.WithTTL(300*time.Millisecond))
	go func() {
		<-inside
		e.srv.Do(t, "DEL", locktest.Key("@grpc/B"))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := e.replicas[0].call(ctx, plainMethod, "A,B")
	wantCode(t, err, codes.Aborted)
}

// Streams take several keys too, from the metadata; with idempotent replay, a unary call holds
// its idempotency key and every business key.
func TestWithKeys_streamsAndIdempotency(t *testing.T) {
	var got atomic.Value
	svc := &service{
		watch: func(in *wrapperspb.StringValue, ss grpc.ServerStream) error {
			_, ok := core.FromContext(ss.Context())
			return ss.SendMsg(wrapperspb.String(fmt.Sprint(ok)))
		},
	}
	keys := grpcmw.WithKeys(grpcmw.Keys(grpcmw.ByMetadata("x-from"), grpcmw.ByMetadata("x-to")))
	e := setup(t, svc, 1, keys, grpcmw.WithIdempotency(time.Minute))
	svc.unary = func(ctx context.Context, _ string, in *wrapperspb.StringValue) (proto.Message, error) {
		got.Store(locktest.Held(t, e.rdb, locktest.Key("@grpc/F")) && locktest.Held(t, e.rdb, locktest.Key("@grpc/T")))
		return wrapperspb.String("ok"), nil
	}
	stream := startReplica(t, e.srv, svc, nil, keys)
	md := metadata.AppendToOutgoingContext(context.Background(), "x-from", "F", "x-to", "T")
	if _, err := e.replicas[0].call(metadata.AppendToOutgoingContext(md, grpcmw.IdempotencyKeyHeader, "i1"), plainMethod, "x"); err != nil {
		t.Fatal(err)
	}
	if got.Load() != true {
		t.Fatal("the idempotent call did not hold both keys")
	}
	out, err := stream.watch(md, "x")
	if err != nil || len(out) != 1 || out[0] != "true" {
		t.Fatalf("stream under a set: %v, %v", out, err)
	}
	// Partly held: the stream fails with codes.Aborted.
	holdLock(t, e, "T", 5*time.Second)
	_, err = stream.watch(md, "x")
	wantCode(t, err, codes.Aborted)
}

func TestWithKeys_invalid(t *testing.T) {
	for name, opts := range map[string][]grpcmw.Option{
		"nil":            {grpcmw.WithKeys(nil)},
		"with WithKey":   {transferKeys(), grpcmw.WithKey(grpcmw.ByRequest())},
		"with WithLimit": {transferKeys(), grpcmw.WithLimit(2)},
		"nil WithKey":    {grpcmw.WithKey(nil)},
	} {
		err, _ := panicOf(func() { grpcmw.UnaryServerInterceptor(&core.Client{}, opts...) }).(error)
		if !errors.Is(err, core.ErrInvalid) || strings.Count(err.Error(), "lockkit") != 1 {
			t.Errorf("%s: panicked with %v, want ErrInvalid", name, err)
		}
	}
	if err, _ := panicOf(func() { grpcmw.Keys(grpcmw.ByRequest(), nil) }).(error); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("Keys with a nil KeyFunc: panicked with %v", err)
	}
}
