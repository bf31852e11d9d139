package coalesce

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// batches is a hook that records the largest pipeline a client sent.
type batches struct{ largest atomic.Int64 }

func (b *batches) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (b *batches) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (b *batches) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for n := int64(len(cmds)); ; {
			old := b.largest.Load()
			if n <= old || b.largest.CompareAndSwap(old, n) {
				break
			}
		}
		return next(ctx, cmds)
	}
}

func client(t *testing.T, o *redis.Options) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestSender_loneCallerGoesStraightOut(t *testing.T) {
	s := redistest.Start(t)
	rdb := client(t, s.Options())
	b := &batches{}
	rdb.AddHook(b)
	snd, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 50 {
		if err := snd.Process(ctx, redis.NewStatusCmd(ctx, "set", "k", i)); err != nil {
			t.Fatal(err)
		}
	}
	if d, p := snd.Stats(); d != 50 || p != 0 {
		t.Errorf("lone caller: %d direct, %d through the pipeliner; want 50 and 0", d, p)
	}
	if n := b.largest.Load(); n != 0 {
		t.Errorf("a lone caller's commands were sent in a pipeline of %d", n)
	}
}

// While one command is in flight (held back by a slow link), the commands of other callers go
// through the pipeliner and leave in one pipeline.
func TestSender_callersWhileOthersAreInFlightAreCoalesced(t *testing.T) {
	s := redistest.Start(t)
	p := s.StartDelayProxy(t, 300*time.Millisecond)
	rdb := client(t, p.Options())
	b := &batches{}
	rdb.AddHook(b)
	snd, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { first <- snd.Process(ctx, redis.NewStatusCmd(ctx, "set", "first", 1)) }()
	deadline := time.Now().Add(5 * time.Second)
	for snd.inflight.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first command never started")
		}
		time.Sleep(time.Millisecond)
	}
	const others = 10
	var wg sync.WaitGroup
	errs := make([]error, others)
	for i := range others {
		wg.Go(func() { errs[i] = snd.Process(ctx, redis.NewStatusCmd(ctx, "set", "k", i)) })
	}
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if d, p := snd.Stats(); d != 1 || p != others {
		t.Errorf("%d direct, %d through the pipeliner; want 1 and %d", d, p, others)
	}
	if n := b.largest.Load(); n < 2 {
		t.Errorf("the pipeliner sent no pipeline of more than one command (largest %d)", n)
	}
}

// ContextBound: the caller's deadline ends its wait; the command still runs and its accessors
// give its outcome once it has.
func TestSender_contextBoundWaitEndsWithTheContext(t *testing.T) {
	s := redistest.Start(t)
	p := s.StartDelayProxy(t, 400*time.Millisecond)
	rdb := client(t, p.Options())
	snd, err := New(rdb, ContextBound(), Threshold(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	cmd := redis.NewStatusCmd(ctx, "set", "bounded", "v")
	start := time.Now()
	err = snd.Process(ctx, cmd)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 300*time.Millisecond {
		t.Fatalf("Process returned %v after %v; want the deadline's error well before the 400ms reply", err, took)
	}
	if err := cmd.Err(); err != nil { // waits for the command to run
		t.Fatalf("the abandoned command failed: %v", err)
	}
	if got := s.Do(t, "get", "bounded"); got != "v" {
		t.Errorf("GET bounded = %v; the abandoned SET did not run", got)
	}
	// An ended context sends nothing.
	gone := redis.NewStatusCmd(ctx, "set", "never", "v")
	if err := snd.Process(ctx, gone); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(gone.Err(), context.DeadlineExceeded) {
		t.Errorf("with an ended context: %v, command error %v", err, gone.Err())
	}
	if got := s.Do(t, "exists", "never"); got != int64(0) {
		t.Errorf("a command sent with an ended context ran")
	}
}

// A fact Sender's design rests on (go-redis v9.23): the blocking face does not watch the
// command's context once it is queued. If go-redis starts honouring it, this test says so.
func TestAutoPipeliner_blockingFaceWaitsPastTheContext(t *testing.T) {
	s := redistest.Start(t)
	p := s.StartDelayProxy(t, 300*time.Millisecond)
	rdb := client(t, p.Options())
	snd, err := New(rdb, Threshold(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = snd.Process(ctx, redis.NewStatusCmd(ctx, "set", "k", "v"))
	if took := time.Since(start); err != nil || took < 250*time.Millisecond {
		t.Errorf("blocking face: %v after %v; want the reply (nil) after the 300ms delay, past the 30ms deadline", err, took)
	}
}

// EVALSHA rides a shared pipeline: a NOSCRIPT reply fails that command only, and the caller's
// load-and-retry (what lockkit does) works through the Sender.
func TestSender_noScriptFailsOnlyItsCommand(t *testing.T) {
	s := redistest.Start(t)
	rdb := client(t, s.Options())
	b := &batches{}
	rdb.AddHook(b)
	ap, err := rdb.AsyncAutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const src = "return redis.call('INCR', KEYS[1])"
	sha := redis.NewScript(src).Hash()
	evalsha := func() *redis.Cmd {
		c := redis.NewCmd(ctx, "evalsha", sha, 1, "n")
		c.SetFirstKeyPos(3)
		return c
	}
	// Submitted without waiting: one pipeline carries all three.
	set1, ev, set2 := redis.NewStatusCmd(ctx, "set", "a", 1), evalsha(), redis.NewStatusCmd(ctx, "set", "b", 2)
	fs := []redis.AutoFuture{ap.Submit(ctx, set1), ap.Submit(ctx, ev), ap.Submit(ctx, set2)}
	for _, f := range fs {
		_ = f.Wait()
	}
	if set1.Err() != nil || set2.Err() != nil {
		t.Errorf("batchmates of a NOSCRIPT failed: %v, %v", set1.Err(), set2.Err())
	}
	if err := ev.Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Errorf("EVALSHA of an unloaded script: %v, want NOSCRIPT", err)
	}
	if n := b.largest.Load(); n < 2 {
		t.Errorf("the three submissions were not pipelined (largest pipeline %d)", n)
	}

	snd, err := New(rdb, Threshold(1)) // everything through the pipeliner
	if err != nil {
		t.Fatal(err)
	}
	cmd := evalsha()
	_ = snd.Process(ctx, cmd)
	if err := cmd.Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Fatalf("EVALSHA through the Sender: %v, want NOSCRIPT", err)
	}
	if err := snd.Process(ctx, redis.NewStringCmd(ctx, "script", "load", src)); err != nil {
		t.Fatal(err)
	}
	cmd = evalsha()
	if err := snd.Process(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	if v, err := cmd.Int64(); err != nil || v != 1 {
		t.Errorf("EVALSHA after SCRIPT LOAD = %v, %v; want 1", v, err)
	}
}
