package pipe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// batches is a go-redis hook that records the size of every pipeline the client sends.
type batches struct {
	mu    sync.Mutex
	sizes []int
}

func (b *batches) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (b *batches) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (b *batches) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		b.mu.Lock()
		b.sizes = append(b.sizes, len(cmds))
		b.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (b *batches) largest() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := 0
	for _, n := range b.sizes {
		m = max(m, n)
	}
	return m
}

func client(t *testing.T, o *redis.Options) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() }) // (stops the pipeliner the client built)
	return rdb
}

// A lone caller goes straight out: nothing is submitted and no pipeliner is even built.
func TestSender_loneCaller_goesDirect(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	s := New(rdb, 2)
	ctx := context.Background()
	for i := range 50 {
		cmd := redis.NewStatusCmd(ctx, "set", fmt.Sprintf("k%d", i), "v")
		if err := s.Process(ctx, cmd); err != nil || cmd.Val() != "OK" {
			t.Fatalf("SET: %q, %v", cmd.Val(), err)
		}
	}
	if d, p := s.direct.Load(), s.piped.Load(); d != 50 || p != 0 {
		t.Fatalf("direct %d, piped %d: want every command direct", d, p)
	}
	if s.ap.Load() != nil {
		t.Fatal("a lone caller built a pipeliner")
	}
}

// Concurrent callers share pipelines: with many commands in flight on a slow link, batches of
// several commands reach the server, and every caller gets its own reply.
func TestSender_concurrentCallers_coalesced(t *testing.T) {
	srv := redistest.Start(t)
	px := srv.StartDelayProxy(t, 5*time.Millisecond)
	rdb := client(t, px.Options())
	var b batches
	rdb.AddHook(&b)
	s := New(rdb, 2)
	setGetCallers(t, s, 32, 20)
	d, p := s.direct.Load(), s.piped.Load()
	if p == 0 || b.largest() < 2 {
		t.Fatalf("direct %d, piped %d, largest pipeline %d: nothing was coalesced", d, p, b.largest())
	}
	t.Logf("direct %d, piped %d, largest pipeline %d", d, p, b.largest())
}

// The caller's context bounds a pipelined command: the wait ends with the context, the error
// matches the context's and says the command was left running (Abandoned), and Settle returns
// once it ran.
func TestSender_contextBoundsThePipelinedCommand(t *testing.T) {
	srv := redistest.Start(t)
	px := srv.StartDelayProxy(t, 300*time.Millisecond)
	rdb := client(t, px.Options())
	s := New(rdb, 1) // every command through the pipeliner
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Process(ctx, redis.NewStatusCmd(ctx, "set", "k", "v"))
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !Abandoned(err) {
		t.Fatalf("err = %v: want the context's error, marked abandoned", err)
	}
	if took >= 250*time.Millisecond {
		t.Fatalf("the call returned after %v: the 30ms context did not bound it (the reply takes 300ms)", took)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	Settle(sctx, err)
	if v := srv.Do(t, "GET", "k"); v != "v" {
		t.Fatalf("after Settle the abandoned SET has not run: GET k = %v", v)
	}
	Settle(sctx, context.Canceled) // any other error: at once
}

// An ended context is not sent, as with the client itself.
func TestSender_endedContext_notSent(t *testing.T) {
	srv := redistest.Start(t)
	s := New(srv.Client(t), 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := redis.NewStatusCmd(ctx, "set", "k", "v")
	if err := s.Process(ctx, cmd); !errors.Is(err, context.Canceled) || Abandoned(err) || !errors.Is(cmd.Err(), context.Canceled) {
		t.Fatalf("err = %v, cmd err = %v: want context.Canceled, not abandoned", err, cmd.Err())
	}
	if v := srv.Do(t, "EXISTS", "k"); v != int64(0) {
		t.Fatal("a command with an ended context was sent")
	}
}

// A full queue does not fail the command: it goes straight out.
func TestSender_queueFull_sendsDirect(t *testing.T) {
	srv := redistest.Start(t)
	px := srv.StartDelayProxy(t, 20*time.Millisecond)
	rdb := client(t, px.Options())
	s := New(rdb, 1)
	s.opts.MaxQueuedCommands = 1
	ctx := context.Background()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range 16 {
		wg.Go(func() {
			cmd := redis.NewStatusCmd(ctx, "set", fmt.Sprintf("k%d", g), "v")
			if err := s.Process(ctx, cmd); err != nil || cmd.Val() != "OK" {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	d, p := s.direct.Load(), s.piped.Load()
	if bad.Load() > 0 || d == 0 {
		t.Fatalf("%d failed; direct %d, piped %d: want every command done, some straight out", bad.Load(), d, p)
	}
}

// A NOSCRIPT reply fails its own command only (the caller then sends EVAL), not its batchmates.
func TestSender_noScript_failsOnlyItsCommand(t *testing.T) {
	srv := redistest.Start(t)
	px := srv.StartDelayProxy(t, 5*time.Millisecond)
	rdb := client(t, px.Options())
	s := New(rdb, 1)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for g := range errs {
		wg.Go(func() {
			var cmd redis.Cmder = redis.NewStatusCmd(ctx, "set", fmt.Sprintf("k%d", g), "v")
			if g == 0 {
				cmd = redis.NewCmd(ctx, "evalsha", "0123456789012345678901234567890123456789", 0)
			}
			_ = s.Process(ctx, cmd)
			errs[g] = cmd.Err()
		})
	}
	wg.Wait()
	if errs[0] == nil || !redis.HasErrorPrefix(errs[0], "NOSCRIPT") {
		t.Fatalf("EVALSHA of an unknown script: %v, want NOSCRIPT", errs[0])
	}
	for g, err := range errs[1:] {
		if err != nil {
			t.Fatalf("batchmate %d failed: %v", g+1, err)
		}
	}
}

// Over a client without a pipeliner (a Ring) every command goes straight out.
func TestSender_ring_goesDirect(t *testing.T) {
	srv := redistest.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr()}})
	defer func() { _ = ring.Close() }()
	s := New(ring, 1)
	ctx := context.Background()
	if err := s.Process(ctx, redis.NewStatusCmd(ctx, "set", "k", "v")); err != nil {
		t.Fatal(err)
	}
	if d, p := s.direct.Load(), s.piped.Load(); d != 1 || p != 0 {
		t.Fatalf("direct %d, piped %d", d, p)
	}
}

// setGetCallers runs callers goroutines that each SET then GET their own key through s, rounds
// times, and fails t when any caller got an error or another caller's reply.
func setGetCallers(t *testing.T, s *Sender, callers, rounds int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range callers {
		wg.Go(func() {
			for i := range rounds {
				key, val := fmt.Sprintf("k%d", g), fmt.Sprintf("v%d", i)
				set := redis.NewStatusCmd(ctx, "set", key, val)
				get := redis.NewStringCmd(ctx, "get", key)
				if s.Process(ctx, set) != nil || s.Process(ctx, get) != nil || get.Val() != val {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if bad.Load() > 0 {
		t.Fatalf("%d callers got a wrong reply or an error", bad.Load())
	}
}
