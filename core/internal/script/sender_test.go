package script

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// countHook counts the script commands a client sends, by name.
type countHook struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

// count counts cmd if it runs a script.
func (h *countHook) count(cmd redis.Cmder) {
	name := strings.ToLower(cmd.Name())
	if !strings.HasPrefix(name, "eval") {
		return
	}
	h.mu.Lock()
	h.n[name]++
	h.mu.Unlock()
}

func (h *countHook) take() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.n
	h.n = map[string]int{}
	return n
}

// Every script's hash (hashes.go) is the one its server gives (SCRIPT LOAD), so a Sender sends
// EVALSHA from the first call without computing a SHA-1 (FIPS 140-only mode) or asking for it; a
// script without a known hash goes as EVAL.
func TestSender_hashesAreTheServers(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	s := NewSender(rdb)
	for _, sc := range all() {
		want, err := rdb.ScriptLoad(ctx, sc.Source).Result()
		if err != nil {
			t.Fatal(err)
		}
		if args := sc.call(nil, 0, 0).Cmd(ctx, s).Args(); args[0] != sc.cmd || args[1] != want {
			t.Fatalf("%s: Cmd sends %v %v; SCRIPT LOAD says %s", sc.Name, args[0], args[1], want)
		}
		unknown := *sc
		unknown.sha = nil
		if args := unknown.call(nil, 0, 0).Cmd(ctx, s).Args(); args[0] != sc.eval {
			t.Fatalf("%s: a script without a hash is sent as %v", sc.Name, args[0])
		}
	}
}

// The first call of a script sends EVALSHA and, on NOSCRIPT, EVAL (which loads it); later calls
// send EVALSHA alone, and so do calls through a Via of the Sender.
// A Runner that is not a Sender gets EVAL.
func TestSender_asksOnceThenEvalsha(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	hook := &countHook{n: map[string]int{}}
	rdb.AddHook(hook)
	ctx := context.Background()
	s := NewSender(rdb)
	call := func(r Runner) {
		t.Helper()
		v, err := (&PTTL{Lock: "sender:k", Token: "t", Fence: ""}).Call().Run(ctx, r).Int64()
		if err != nil || v != -3 {
			t.Fatalf("pttl = %d, %v", v, err)
		}
	}
	call(s)
	if n := hook.take(); n["eval"] != 1 || n["evalsha"] != 1 || len(n) != 2 {
		t.Fatalf("first call sent %v, want EVALSHA (NOSCRIPT) and EVAL", n)
	}
	call(s)
	call(Via(s, rdb.Conn()))
	if n := hook.take(); n["evalsha"] != 2 || len(n) != 1 {
		t.Fatalf("later calls sent %v, want EVALSHA only", n)
	}
	call(rdb)
	if n := hook.take(); n["eval"] != 1 || len(n) != 1 {
		t.Fatalf("a call through a plain client sent %v, want EVAL", n)
	}
	cmd := (&PTTL{Lock: "sender:k", Token: "t", Fence: ""}).Call().Cmd(ctx, s)
	if name := cmd.Args()[0]; name != "evalsha" {
		t.Fatalf("Cmd over a Sender that has the hash: %v", name)
	}
	if name := (&Inspect{Lock: "sender:k"}).Call().Cmd(ctx, rdb).Args()[0]; name != "eval_ro" {
		t.Fatalf("Cmd of a read-only script over a plain client: %v", name)
	}
	if n := hook.take(); len(n) != 0 {
		t.Fatalf("Cmd of a known hash, or over a plain client, sent %v", n)
	}
	// A flushed script cache: EVALSHA, NOSCRIPT, EVAL (the hash stays right).
	srv.Do(t, "SCRIPT", "FLUSH")
	call(s)
	if n := hook.take(); n["eval"] != 1 || n["evalsha"] != 1 || len(n) != 2 {
		t.Fatalf("after SCRIPT FLUSH: %v", n)
	}
}

// Concurrent first calls (EVALSHA, and EVAL on NOSCRIPT) all get the script's answer.
func TestSender_concurrentFirstCalls(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	s := NewSender(rdb)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			v, err := (&PTTL{Lock: "sender:c", Token: "t", Fence: ""}).Call().Run(ctx, s).Int64()
			if err != nil || v != -3 {
				t.Errorf("pttl = %d, %v", v, err)
			}
		})
	}
	wg.Wait()
}

// Digest is the server's SHA-1 of a text, as release messages name a waiter's token.
func TestDigest(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	for _, r := range []Runner{rdb, NewSender(rdb)} {
		got, err := Digest(context.Background(), r, "a token")
		sum := sha1.Sum([]byte("a token"))
		if want := hex.EncodeToString(sum[:]); err != nil || got != want {
			t.Fatalf("Digest = %q, %v; want %s", got, err, want)
		}
	}
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer func() { _ = down.Close() }()
	if _, err := Digest(context.Background(), down, "a token"); err == nil {
		t.Fatal("no error from a stopped server")
	}
}
