package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/lockkit/lockkit/internal/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun serves the orders API against a real redis-server, creates an order, replays the POST
// with the same Idempotency-Key, and shuts the server down through its context.
func TestRun(t *testing.T) {
	srv := redistest.Start(t)
	addr := locktest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, addr, srv.Addr(), 50*time.Millisecond) }()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	base := "http://" + addr
	post := func(key string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader(`{"item":"book","quantity":2}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}

	// Wait until the server accepts connections (or run has failed).
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("run returned before serving: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server on %s not up after 5s: %v", addr, err)
		}
	}

	first, body1 := post("order-key-1")
	if first.StatusCode != http.StatusCreated || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first POST: %d replayed=%q body %s", first.StatusCode, first.Header.Get("Idempotent-Replayed"), body1)
	}
	var o order
	if err := json.Unmarshal([]byte(body1), &o); err != nil || o.ID != "ord_1" || o.Item != "book" || o.Quantity != 2 {
		t.Fatalf("first POST body %s: %+v %v", body1, o, err)
	}
	replay, body2 := post("order-key-1")
	if replay.StatusCode != http.StatusCreated || replay.Header.Get("Idempotent-Replayed") != "true" || body2 != body1 {
		t.Fatalf("replayed POST: %d replayed=%q body %s, want 201, true and %s",
			replay.StatusCode, replay.Header.Get("Idempotent-Replayed"), body2, body1)
	}
	if loc := replay.Header.Get("Location"); loc != "/orders/ord_1" {
		t.Errorf("replayed Location %q, want /orders/ord_1", loc)
	}
	if r, body := post(""); r.StatusCode != http.StatusBadRequest {
		t.Errorf("POST without a key: %d %s, want 400", r.StatusCode, body)
	}
	resp, err := client.Get(base + "/orders/ord_2")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /orders/ord_2: %d, want 404 (the replay must not create a second order)", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}
