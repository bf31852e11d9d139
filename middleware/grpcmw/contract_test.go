package grpcmw_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"google.golang.org/grpc/codes"
)

// panicOf returns what build panicked with, nil if it did not.
func panicOf(build func()) (p any) {
	defer func() { p = recover() }()
	build()
	return nil
}

// The options of idempotent replay are refused by StreamServerInterceptor at construction, in the
// one error shape; every option is accepted by UnaryServerInterceptor.
func TestOptions_misplacedAreRefused(t *testing.T) {
	unaryOnly := map[string]grpcmw.Option{
		"WithIdempotency":      grpcmw.WithIdempotency(time.Hour),
		"WithIdempotencyScope": grpcmw.WithIdempotencyScope(func(context.Context, string) (string, error) { return "", nil }),
		"WithStoredErrors":     grpcmw.WithStoredErrors(codes.NotFound),
		"WithMaxBody":          grpcmw.WithMaxBody(10),
	}
	for name, opt := range unaryOnly {
		err, _ := panicOf(func() { grpcmw.StreamServerInterceptor(&core.Client{}, opt) }).(error)
		if want := "lockkit: grpcmw: " + name + " does not apply to StreamServerInterceptor"; !errors.Is(err, core.ErrInvalid) || err.Error() != want {
			t.Errorf("StreamServerInterceptor(%s): panicked with %v, want %q", name, err, want)
		}
		if p := panicOf(func() { grpcmw.UnaryServerInterceptor(&core.Client{}, opt) }); p != nil {
			t.Errorf("UnaryServerInterceptor(%s): panicked with %v", name, p)
		}
	}
}

// Invalid options panic with "lockkit: grpcmw: WHAT", matching core.ErrInvalid, "lockkit" once;
// the limit's bound is core.MaxPermits.
func TestOptions_errorShape(t *testing.T) {
	for want, opts := range map[string][]grpcmw.Option{
		"lockkit: grpcmw: WithTTL(1ms) is outside [10ms, 24h0m0s]":                       {grpcmw.WithTTL(time.Millisecond)},
		"lockkit: grpcmw: WithWait(-1s) is negative":                                     {grpcmw.WithWait(-time.Second)},
		fmt.Sprintf("lockkit: grpcmw: WithLimit(0) is outside [1, %d]", core.MaxPermits): {grpcmw.WithLimit(0)},
		fmt.Sprintf("lockkit: grpcmw: WithLimit(%d) is outside [1, %d]", core.MaxPermits+1, core.MaxPermits): {
			grpcmw.WithLimit(core.MaxPermits + 1)},
		"lockkit: grpcmw: WithKey(nil)": {grpcmw.WithKey(nil)},
	} {
		err, _ := panicOf(func() { grpcmw.UnaryServerInterceptor(&core.Client{}, opts...) }).(error)
		if !errors.Is(err, core.ErrInvalid) || err.Error() != want || strings.Count(err.Error(), "lockkit") != 1 {
			t.Errorf("panicked with %v, want %q matching core.ErrInvalid", err, want)
		}
	}
	if err, _ := panicOf(func() { grpcmw.UnaryServerInterceptor(nil) }).(error); err == nil ||
		err.Error() != "lockkit: grpcmw: UnaryServerInterceptor needs a *core.Client" {
		t.Errorf("nil client: panicked with %v", err)
	}
	if err, _ := panicOf(func() { grpcmw.ByMetadata("") }).(error); !errors.Is(err, core.ErrInvalid) ||
		err.Error() != "lockkit: grpcmw: ByMetadata: the metadata name is empty" {
		t.Errorf("ByMetadata(\"\"): panicked with %v, want an error matching core.ErrInvalid", err)
	}
	if p := panicOf(func() { grpcmw.UnaryServerInterceptor(&core.Client{}, grpcmw.WithLimit(core.MaxPermits)) }); p != nil {
		t.Errorf("WithLimit(core.MaxPermits): panicked with %v", p)
	}
}

// Without WithLogger, what the caller is not told goes to slog.Default() (read when logging); a
// discarding logger silences it.
func TestOptions_loggerDefaultsToSlogDefault(t *testing.T) {
	svc := &service{unary: echo}
	srv := redistest.Start(t)
	loud := startReplica(t, srv, svc, nil)
	quiet := startReplica(t, srv, svc, nil, grpcmw.WithLogger(slog.New(slog.DiscardHandler)))
	var logs logBuffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	srv.Stop(t)
	ctx := context.Background()
	_, err := quiet.call(ctx, keyedMethod, "acct-q")
	wantCode(t, err, codes.Unavailable)
	if strings.Contains(logs.String(), "lock unavailable") {
		t.Fatalf("a discarding logger logged to slog.Default(): %s", logs.String())
	}
	_, err = loud.call(ctx, keyedMethod, "acct-l")
	wantCode(t, err, codes.Unavailable)
	if !strings.Contains(logs.String(), "lockkit: grpcmw: lock unavailable") {
		t.Fatalf("nothing logged to slog.Default(): %q", logs.String())
	}
}

// logBuffer collects log lines written from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
