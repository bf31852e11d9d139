package core_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
)

// semChildEnv runs the test binary as a semaphore child: "work ADDR ROUNDS" (8 goroutines doing
// ROUNDS permits each of "proof", printing "done N") or "hold ADDR" (takes 2 permits of "crash",
// prints "held", then sleeps until killed).
const semChildEnv = "LOCKKIT_SEM_CHILD"

// underPermit runs under a permit: it counts the holders in Redis, records the highest count seen
// and the worker's id with the permit's fence, and reports a count above the limit.
var underPermit = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end
if n > tonumber(ARGV[2]) then redis.call('RPUSH', KEYS[3], ARGV[1]) end
redis.call('RPUSH', KEYS[4], ARGV[3] .. ' ' .. ARGV[1])
return n`)
}) // (made on first use: see bench_test.go's rawRelease)

var proofKeys = []string{"proof:holders", "proof:max", "proof:violations", "proof:fences"}

// proofWork takes a permit of "proof" (4 permits) for worker id, counts itself in, holds 1ms,
// counts itself out.
func proofWork(ctx context.Context, c *core.Client, rdb redis.Scripter, id string) error {
	return c.Do(ctx, "proof", 2*time.Second, func(lctx context.Context) error {
		l, _ := core.FromContext(lctx)
		if err := underPermit().Run(lctx, rdb, proofKeys, l.Fence(), 4, id).Err(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond) // the work
		return rdb.(redis.Cmdable).Decr(lctx, proofKeys[0]).Err()
	}, core.Permits(4))
}

func semChild(spec string) error {
	f := strings.Fields(spec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: f[1]})
	defer rdb.Close()
	c, err := core.New(rdb)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	switch f[0] {
	case "hold":
		for range 2 {
			if _, err := c.Acquire(ctx, "crash", time.Second, core.Permits(2)); err != nil {
				return err
			}
		}
		fmt.Println("held")
		<-ctx.Done()
		return nil
	case "work":
		rounds, _ := strconv.Atoi(f[2])
		var wg sync.WaitGroup
		var done atomic.Int64
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					if err := proofWork(ctx, c, rdb, "child-"+strconv.Itoa(w)); err != nil {
						errs <- err
						return
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		fmt.Printf("done %d\n", done.Load())
		return nil
	}
	return fmt.Errorf("unknown child mode %q", spec)
}

// startSemChild runs the test binary as a child in the given mode and returns its output lines.
func startSemChild(t *testing.T, spec string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), semChildEnv+"="+spec)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, lines
}

// 4 permits, 32 goroutines over 2 Clients and a child process: never more than 4 holders at once
// (a Redis-side counter written under each permit), every fence unique, every permit handed on.
func TestPermits_proof_neverMoreThanLimit(t *testing.T) {
	srv, rdb, _ := setup(t)
	const rounds = 25
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, lines := startSemChild(t, "work "+srv.Addr()+" "+strconv.Itoa(rounds))
	clients := []*core.Client{locktest.NewClient(t, srv.Client(t)), locktest.NewClient(t, srv.Client(t))}
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := proofWork(ctx, clients[g%2], rdb, "parent-"+strconv.Itoa(g)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	select {
	case l := <-lines:
		if l != fmt.Sprintf("done %d", 8*rounds) {
			t.Fatalf("child said %q", l)
		}
	case <-ctx.Done():
		t.Fatal("child did not finish")
	}
	if v := rdb.LRange(ctx, proofKeys[2], 0, -1).Val(); len(v) > 0 {
		t.Fatalf("more than 4 holders at once, %d times", len(v))
	}
	if m, _ := rdb.Get(ctx, proofKeys[1]).Int(); m != 4 {
		t.Fatalf("at most %d holders at once, want exactly 4 (the semaphore was saturated)", m)
	}
	// Fences are unique, and each worker's strictly increase.
	fences := rdb.LRange(ctx, proofKeys[3], 0, -1).Val()
	seen := map[string]bool{}
	last := map[string]int64{}
	for _, e := range fences {
		id, f, _ := strings.Cut(e, " ")
		if seen[f] {
			t.Fatalf("fence %s handed out twice", f)
		}
		seen[f] = true
		n, _ := strconv.ParseInt(f, 10, 64)
		if n <= last[id] {
			t.Fatalf("worker %s got fence %d after %d", id, n, last[id])
		}
		last[id] = n
	}
	if len(last) != 32 {
		t.Fatalf("%d workers recorded permits, want 32", len(last))
	}
	if len(fences) != 32*rounds {
		t.Fatalf("%d permits held, want %d", len(fences), 32*rounds)
	}
	if n := rdb.Exists(ctx, locktest.Key("proof", "permits")).Val(); n != 0 {
		t.Fatal("permits left after every holder released")
	}
}

// A holder SIGKILLed while holding frees its permits once their leases run out; not before.
func TestPermits_killedHolderFreesAfterTTL(t *testing.T) {
	srv, _, c := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, lines := startSemChild(t, "hold "+srv.Addr())
	if l := <-lines; l != "held" {
		t.Fatalf("child said %q", l)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	if _, err := c.TryAcquire(ctx, "crash", time.Second, core.Permits(2)); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("right after the kill: %v, want ErrNotAcquired (the dead holder's leases still run)", err)
	}
	for range 2 {
		p, err := c.Acquire(ctx, "crash", time.Second, core.Permits(2))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release(ctx)
	}
	waited := time.Since(killed)
	t.Logf("both permits reclaimed %v after the kill (TTL 1s)", waited.Round(time.Millisecond))
	if waited > 1500*time.Millisecond {
		t.Fatalf("reclaimed after %v, want within the 1s TTL (+ slack)", waited)
	}
}

// failRenewals makes a client's pipelines (the watchdog's renewals) fail while on is set, without
// sending them; n counts them.
type failRenewals struct {
	on atomic.Bool
	n  atomic.Int64
}

func (h *failRenewals) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *failRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *failRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			h.n.Add(1)
			err := errors.New("renewals cut off (test)")
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// A live holder whose renewals fail has its context cancelled before Redis hands its permit to
// anyone else.
func TestPermits_renewalsFail_cancelledBeforeHandedOn(t *testing.T) {
	srv, rdb, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cut := &failRenewals{}
	a := srv.Client(t)
	a.AddHook(cut)
	ca := locktest.NewClient(t, a)
	cb := locktest.NewClient(t, rdb)
	const ttl = 300 * time.Millisecond
	p, err := ca.Acquire(ctx, "cut", ttl, core.Permits(1))
	if err != nil {
		t.Fatal(err)
	}
	cut.on.Store(true)
	var got *core.Lock
	for got == nil {
		got, err = cb.TryAcquire(ctx, "cut", ttl, core.Permits(1))
		if err != nil && !errors.Is(err, core.ErrNotAcquired) {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatal("never acquired")
		}
		if got == nil {
			time.Sleep(2 * time.Millisecond)
		}
	}
	defer got.Release(ctx)
	// The holder's context must be done by the time the permit is somebody else's.
	if p.Context().Err() == nil {
		t.Fatal("the permit was handed on while its holder's context was live")
	}
	var le *core.LostError
	if cause := context.Cause(p.Context()); !errors.As(cause, &le) || le.Reason != "expired" {
		t.Fatalf("cause %v, want LostError expired", cause)
	}
	if err := p.Release(ctx); !errors.Is(err, core.ErrLost) {
		t.Fatalf("release after loss: %v, want ErrLost", err)
	}
}
