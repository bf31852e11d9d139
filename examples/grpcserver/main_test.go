package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestServeAndClient serves the accounts service against a real redis-server, runs the -client
// demo against it (which fails on lost updates or a wrong balance), makes a retried withdrawal
// directly and checks that it is replayed, then stops the server through its context.
func TestServeAndClient(t *testing.T) {
	srv := redistest.Start(t)
	addr := locktest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, addr, srv.Addr()) }()

	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve returned before serving: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server on %s not up after 5s: %v", addr, err)
		}
	}

	if err := demo(ctx, addr, ""); err != nil {
		t.Fatalf("client demo: %v", err)
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	ictx := metadata.AppendToOutgoingContext(cctx, grpcmw.IdempotencyKeyHeader, "smoke-withdraw-7")
	in, err := structpb.NewStruct(map[string]any{"account": "smoke", "amount": 7})
	if err != nil {
		t.Fatal(err)
	}
	for i, wantReplayed := range []string{"", "true"} {
		var hdr metadata.MD
		out := &structpb.Struct{}
		if err := conn.Invoke(ictx, withdrawMethod, in, out, grpc.Header(&hdr)); err != nil {
			t.Fatalf("withdraw, attempt %d: %v", i+1, err)
		}
		if b := out.GetFields()["balance"].GetNumberValue(); b != startBalance-7 {
			t.Errorf("withdraw, attempt %d: balance %v, want %d", i+1, b, startBalance-7)
		}
		if got := strings.Join(hdr.Get(grpcmw.ReplayedHeader), ","); got != wantReplayed {
			t.Errorf("withdraw, attempt %d: %s %q, want %q", i+1, grpcmw.ReplayedHeader, got, wantReplayed)
		}
	}
	out := &structpb.Struct{}
	if err := conn.Invoke(cctx, balanceMethod, in, out); err != nil || out.GetFields()["balance"].GetNumberValue() != startBalance-7 {
		t.Errorf("balance after the retried withdrawal: %v %v, want %d", out, err, startBalance-7)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
}
