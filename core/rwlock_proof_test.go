package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
)

// underRW runs under a hold of the read-write lock: it counts the readers and writers in Redis
// (ARGV[1] "r" or "w"), logs the hold's entry with its fence (ARGV[2]) in Redis's own order, and
// records a violation: a writer with anyone else in, a reader with a writer in.
var underRW = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local r = tonumber(redis.call('GET', KEYS[1]) or '0')
local w = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[1] == 'w' then
  if r > 0 or w > 0 then redis.call('RPUSH', KEYS[3], 'writer with ' .. r .. ' readers, ' .. w .. ' writers') end
  redis.call('INCR', KEYS[2])
else
  if w > 0 then redis.call('RPUSH', KEYS[3], 'reader with ' .. w .. ' writers') end
  r = redis.call('INCR', KEYS[1])
  if r > tonumber(redis.call('GET', KEYS[5]) or '0') then redis.call('SET', KEYS[5], r) end
end
redis.call('RPUSH', KEYS[4], ARGV[1] .. ' ' .. ARGV[2])
return 0`)
}) // (made on first use: see bench_test.go's rawRelease)

var rwProofKeys = []string{"proof:readers", "proof:writers", "proof:violations", "proof:order", "proof:maxreaders"}

// rwProofWork takes the read (or write) side of "proof", counts itself in, works up to 2ms,
// counts itself out.
func rwProofWork(ctx context.Context, c *core.Client, rdb *redis.Client, write bool, work time.Duration) error {
	mode, side, count := core.Read(), "r", rwProofKeys[0]
	if write {
		mode, side, count = core.Write(), "w", rwProofKeys[1]
	}
	return c.Do(ctx, "proof", 2*time.Second, func(lctx context.Context) error {
		l, _ := core.FromContext(lctx)
		if err := underRW().Run(lctx, rdb, rwProofKeys, side, l.Fence()).Err(); err != nil {
			return err
		}
		time.Sleep(work) // the work
		return rdb.Decr(lctx, count).Err()
	}, mode)
}

// 24 goroutines over 3 Clients, a fifth of their holds writes: never a writer with a reader or
// another writer in (counted in Redis under each hold), readers did share, and fences follow the
// order of the holds around every writer: each hold that entered before a writer has a lower
// fence, each that entered after it a higher one.
func TestRW_proof_exclusionAndFenceOrder(t *testing.T) {
	srv, rdb, _ := setup(t)
	const rounds = 30
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients := []*core.Client{locktest.NewClient(t, srv.Client(t)), locktest.NewClient(t, srv.Client(t)), locktest.NewClient(t, srv.Client(t))}
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			for range rounds {
				work := time.Duration(rnd.IntN(3)) * time.Millisecond
				if err := rwProofWork(ctx, clients[g%3], rdb, rnd.IntN(5) == 0, work); err != nil {
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
	if v := rdb.LRange(ctx, rwProofKeys[2], 0, -1).Val(); len(v) > 0 {
		t.Fatalf("%d exclusion violations, first: %s", len(v), v[0])
	}
	if m, _ := rdb.Get(ctx, rwProofKeys[4]).Int(); m < 2 {
		t.Fatalf("at most %d readers at once: readers never shared, the test proves nothing", m)
	}
	order := rdb.LRange(ctx, rwProofKeys[3], 0, -1).Val()
	if len(order) != 24*rounds {
		t.Fatalf("%d holds, want %d", len(order), 24*rounds)
	}
	type entry struct {
		write bool
		fence int64
	}
	es := make([]entry, len(order))
	writes := 0
	for i, s := range order {
		side, f, _ := strings.Cut(s, " ")
		es[i].write = side == "w"
		es[i].fence, _ = strconv.ParseInt(f, 10, 64)
		if es[i].write {
			writes++
		}
	}
	for i, w := range es {
		if !w.write {
			continue
		}
		for j, x := range es {
			if j < i && x.fence >= w.fence || j > i && x.fence <= w.fence {
				t.Fatalf("hold %d (fence %d) entered %s writer %d (fence %d)", j, x.fence,
					map[bool]string{true: "before", false: "after"}[j < i], i, w.fence)
			}
		}
	}
	m, _ := rdb.Get(ctx, rwProofKeys[4]).Int()
	t.Logf("%d holds, %d writes, up to %d readers at once, no violation", len(es), writes, m)
	if n := rdb.Exists(ctx, locktest.Key("proof", "rw"), locktest.Key("proof", "rw", "queue")).Val(); n != 0 {
		t.Fatal("leases or waiters left after every holder released")
	}
}

// A writer is not starved by a continuous stream of overlapping readers (8 readers, each holding
// 30 to 60 ms and coming back at once: the lock is never free of readers): a writer every 100 ms
// waits only for the readers ahead of it. Bound: 1 s, several times a reader's hold.
func TestRW_writerNotStarvedByReaders(t *testing.T) {
	srv, _, _ := setup(t)
	readers, writer := locktest.NewClient(t, srv.Client(t)), locktest.NewClient(t, srv.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := readers.Do(ctx, "feed", time.Second, func(context.Context) error {
					time.Sleep(time.Duration(30+rnd.IntN(31)) * time.Millisecond)
					return nil
				}, core.Read())
				if err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	var waits []time.Duration
	for range 20 {
		time.Sleep(100 * time.Millisecond) // the writer's period: the workload, not a synchronisation
		start := time.Now()
		w, err := writer.Acquire(ctx, "feed", time.Second, core.Write(), core.WithWait(5*time.Second))
		if err != nil {
			t.Fatalf("writer starved: %v", err)
		}
		waits = append(waits, time.Since(start))
		_ = w.Release(ctx)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(waits)
	t.Logf("%d reads; writer waits: median %v, max %v", reads.Load(), waits[len(waits)/2].Round(time.Millisecond),
		waits[len(waits)-1].Round(time.Millisecond))
	if reads.Load() < 40 {
		t.Fatalf("only %d reads: the stream of readers proves nothing", reads.Load())
	}
	if waits[len(waits)-1] > time.Second {
		t.Fatalf("a writer waited %v behind readers that hold 60 ms at most", waits[len(waits)-1])
	}
}

// A reader (and a writer) whose renewals fail has its context cancelled before Redis lets the
// other side in. The cancellation is timed by the Lost hook, which runs right after it (an upper
// bound); the grant by the other side's fence, which is Redis's clock in µs when it granted (the
// counter's last value, the holder's fence, is older): both read the machine's wall clock.
func TestRW_renewalsFail_cancelledBeforeHandedOn(t *testing.T) {
	for _, side := range []string{"read", "write"} {
		t.Run(side, func(t *testing.T) {
			srv, rdb, _ := setup(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cut := &failRenewals{}
			a := srv.Client(t)
			a.AddHook(cut)
			var lostAt atomic.Int64 // µs
			ca := locktest.NewClient(t, a, core.WithHook(core.Hook{Lost: func(context.Context, core.HoldInfo) {
				lostAt.Store(time.Now().UnixMicro())
			}}))
			cb := locktest.NewClient(t, rdb)
			mine, theirs := core.Read(), core.Write()
			if side == "write" {
				mine, theirs = core.Write(), core.Read()
			}
			const ttl = 300 * time.Millisecond
			l, err := ca.Acquire(ctx, "cut", ttl, mine)
			if err != nil {
				t.Fatal(err)
			}
			cut.on.Store(true)
			var got *core.Lock
			for got == nil {
				got, err = cb.TryAcquire(ctx, "cut", ttl, theirs)
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
			if l.Context().Err() == nil {
				t.Fatal("the lock passed on while the holder's context was live")
			}
			locktest.Eventually(t, time.Second, "the Lost hook", func() bool { return lostAt.Load() != 0 })
			if lost, granted := lostAt.Load(), got.Fence(); lost >= granted {
				t.Fatalf("holder's loss reported at %d µs, the lock granted at %d µs (Redis clock): not before", lost, granted)
			}
			var le *core.LostError
			if cause := context.Cause(l.Context()); !errors.As(cause, &le) || le.Reason != "expired" {
				t.Fatalf("cause %v, want LostError expired", cause)
			}
			t.Logf("context cancelled at least %v before the lock passed on", time.Duration(got.Fence()-lostAt.Load())*time.Microsecond)
		})
	}
}

// Every key a read-write lock writes has a TTL, on every path: holds, waiters queued, release
// receipts, the fence counter.
func TestRW_everyKeyExpires(t *testing.T) {
	srv, rdb, c := setup(t)
	other := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	r, _ := c.Acquire(ctx, "x", time.Second, core.Read())
	done := make(chan error, 1)
	go func() {
		w, err := other.Acquire(ctx, "x", time.Second, core.Write(), core.WithWait(5*time.Second))
		if err == nil {
			err = w.Release(ctx)
		}
		done <- err
	}()
	locktest.Eventually(t, 2*time.Second, "a writer queued", func() bool { return rdb.Exists(ctx, locktest.Key("x", "rw", "queue")).Val() == 1 })
	_ = r.Extend(ctx, 3*time.Second)
	check := func(when string) {
		t.Helper()
		keys := rdb.Keys(ctx, "lockkit:{x}*").Val()
		if len(keys) == 0 {
			t.Fatalf("%s: no key to check: the test proves nothing", when)
		}
		for _, k := range keys {
			if pttl := rdb.PTTL(ctx, k).Val(); pttl < 0 {
				t.Errorf("%s: key %q has no TTL (%v)", when, k, pttl)
			}
		}
	}
	check("while held and queued")
	_ = r.Release(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	check(fmt.Sprintf("after release (%v)", rdb.Keys(ctx, "lockkit:{x}*").Val()))
}
