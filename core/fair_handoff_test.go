package core_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
)

// Fair mode's direct handoff (grant.go, internal/script/lua/queue.lua): a release hands the lock to the first
// live waiter of the Redis-side queue inside the script, and a grant message tells the waiter.

// fairQueue returns the tokens of name's fair queue, first first (see internal/script/lua/queue.lua for a member).
func fairQueue(t testing.TB, rdb *redis.Client, name string) []string {
	t.Helper()
	var toks []string
	for _, w := range queued(t, rdb, locktest.Key(name, "queue")) {
		toks = append(toks, w.tok)
	}
	return toks
}

// queuedWaiter is a member of a Redis-side queue (queue.lua): a fair lock's or a semaphore's.
type queuedWaiter struct {
	tok, x, member string
	epoch          int64 // µs
}

// queued returns the waiters of the queue key, first first.
func queued(t testing.TB, rdb *redis.Client, key string) []queuedWaiter {
	t.Helper()
	var out []queuedWaiter
	for _, z := range rdb.ZRangeWithScores(context.Background(), key, 0, -1).Val() {
		m := z.Member.(string)
		f := strings.Split(m, "\x00")
		if len(f) != 5 {
			t.Fatalf("queue member %q: want TTL, timeout, token, X, label", m)
		}
		out = append(out, queuedWaiter{tok: f[2], x: f[3], member: m, epoch: int64(z.Score) / 2})
	}
	return out
}

// enqueue puts a waiter in the queue key as an attempt queues one (queue.lua): it queued at
// epoch, may wait timeout, and asks for ttl; x is a lock waiter's hold or a permit waiter's limit.
func enqueue(t testing.TB, rdb *redis.Client, key, token, x string, ttl, timeout time.Duration, epoch time.Time) string {
	t.Helper()
	m := strconv.FormatInt(ttl.Milliseconds(), 10) + "\x00" + strconv.FormatInt(timeout.Milliseconds(), 10) + "\x00" +
		token + "\x00" + x + "\x00host 1 test"
	if err := rdb.ZAdd(context.Background(), key, redis.Z{Score: float64(2 * epoch.UnixMicro()), Member: m}).Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// acquireFair runs c.Acquire(ctx, name, ttl, core.Fair()) in the background; the channel gets the
// lock (nil on an error, which fails the test).
func acquireFair(t *testing.T, ctx context.Context, c *core.Client, name string, ttl time.Duration) <-chan *core.Lock {
	got := make(chan *core.Lock, 1)
	go func() {
		l, err := c.Acquire(ctx, name, ttl, core.Fair())
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	return got
}

// counting is a Hook that counts acquire attempts and acquisitions.
type counting struct{ attempts, acquired atomic.Int64 }

func (c *counting) hook() core.Option {
	return core.WithHook(core.Hook{
		Attempt:  func(context.Context, core.WaitInfo) { c.attempts.Add(1) },
		Acquired: func(context.Context, core.HoldInfo) context.Context { c.acquired.Add(1); return nil },
	})
}

// A release hands the lock to the queue's first waiter: the waiter holds without another attempt,
// with the next fence, its own label (Inspect), its Acquired event, and a full lease.
func TestFair_handoff_grantReceived(t *testing.T) {
	_, rdb, holder := setup(t)
	var n counting
	c := locktest.NewClient(t, rdb, core.WithLabel("waiter"), core.WithRetryBackoff(5*time.Second, 10*time.Second),
		core.WithFairWaiterTimeout(30*time.Second), n.hook())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "g", 10*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	got := acquireFair(t, ctx, c, "g", 5*time.Second)
	// Its first attempt queued it; once subscribed it tried again (a grant may have come in between)
	// and parked, polling only after 5s.
	locktest.Eventually(t, 5*time.Second, "waiter queued and parked", func() bool {
		return len(fairQueue(t, rdb, "g")) == 1 && n.attempts.Load() == 2
	})
	before := n.attempts.Load()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	defer l.Release(ctx)
	if a := n.attempts.Load(); a != before {
		t.Fatalf("%d acquire attempts after the release, want none (the release handed the lock on)", a-before)
	}
	if l.Fence() <= h.Fence() || l.Holds() != 1 || n.acquired.Load() != 1 {
		t.Fatalf("fence %d after %d, holds %d, Acquired events %d", l.Fence(), h.Fence(), l.Holds(), n.acquired.Load())
	}
	if s := lockState(t, rdb, locktest.Key("g")); s.Token != l.Token() || s.Fence != l.Fence() {
		t.Fatalf("Redis records %+v, the waiter holds fence %d", s, l.Fence())
	}
	info, err := holder.Inspect(ctx, "g")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Label != "waiter" || info.Queued != 0 {
		t.Fatalf("Inspect: %+v, %v", info, err)
	}
	if d := rdb.PTTL(ctx, locktest.Key("g")).Val(); d < 4*time.Second {
		t.Fatalf("PTTL %v: the grant's lease is not the waiter's 5s TTL", d)
	}
}

// The grant message is lost (published before the waiter's Client subscribed: its replies come
// 300ms late): the waiter's next attempt finds the lock handed to it and holds it.
func TestFair_handoff_grantMessageLost(t *testing.T) {
	srv, rdb, holder := setup(t)
	var n counting
	slow := redis.NewClient(srv.StartDelayProxy(t, 300*time.Millisecond).Options())
	t.Cleanup(func() { slow.Close() })
	c := locktest.NewClient(t, slow, n.hook())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "lost", 10*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	got := acquireFair(t, ctx, c, "lost", 5*time.Second)
	locktest.Eventually(t, 5*time.Second, "waiter queued", func() bool { return len(fairQueue(t, rdb, "lost")) == 1 })
	if subscribers(t, rdb, "lost") != 0 {
		t.Fatal("the waiter subscribed before its attempt's reply came: the test proves nothing")
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	defer l.Release(ctx)
	if a := n.attempts.Load(); a != 2 || l.Fence() <= h.Fence() || l.Holds() != 1 {
		t.Fatalf("%d attempts, fence %d after %d, holds %d; want the second attempt to find the lock handed over", a, l.Fence(), h.Fence(), l.Holds())
	}
}

// A waiter that gives up after a release handed it the lock (it heard of the grant too late)
// hands the lock on to the next waiter at once; the last waiter to give up leaves it free. The
// lock is neither stuck for the grant's TTL nor held by two.
func TestFair_handoff_waiterGivesUpGrantHandedOn(t *testing.T) {
	srv, rdb, holder := setup(t)
	slow := redis.NewClient(srv.StartDelayProxy(t, 300*time.Millisecond).Options())
	t.Cleanup(func() { slow.Close() })
	// W1 hears everything 300ms late (its grant message too); both poll every 5s or more (a poll of
	// W1's in flight when the lock is handed to it would take it, legitimately, before it gives up).
	var n1 counting
	w1c := locktest.NewClient(t, slow, core.WithRetryBackoff(5*time.Second, 10*time.Second), core.WithFairWaiterTimeout(30*time.Second), n1.hook())
	w2c := locktest.NewClient(t, rdb, core.WithRetryBackoff(5*time.Second, 10*time.Second), core.WithFairWaiterTimeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "gone", 10*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	wait := func(c *core.Client, ctx context.Context) chan *core.Lock {
		out := make(chan *core.Lock, 1)
		go func() {
			l, _ := c.Acquire(ctx, "gone", 10*time.Second, core.Fair())
			out <- l
		}()
		return out
	}
	ctx1, cancel1 := context.WithCancel(ctx)
	w1 := wait(w1c, ctx1)
	locktest.Eventually(t, 5*time.Second, "W1 queued, subscribed and parked", func() bool {
		return len(fairQueue(t, rdb, "gone")) == 1 && n1.attempts.Load() == 2
	})
	w2 := wait(w2c, ctx)
	locktest.Eventually(t, 5*time.Second, "W2 queued and parked", func() bool {
		return len(fairQueue(t, rdb, "gone")) == 2 && core.WaitersParked(w2c) == 1
	})
	w1tok := fairQueue(t, rdb, "gone")[0]
	released := time.Now()
	if err := h.Release(ctx); err != nil { // hands the lock to W1, which hears it 300ms late
		t.Fatal(err)
	}
	if s := lockState(t, rdb, locktest.Key("gone")); s.Token != w1tok {
		t.Fatal("the release did not hand the lock to the queue's head")
	}
	cancel1() // W1 gives up first
	if l := <-w1; l != nil {
		t.Fatal("W1 acquired although it gave up")
	}
	l := <-w2
	took := time.Since(released)
	t.Logf("W2 got the lock %v after the release", took.Round(time.Millisecond))
	if l == nil || took > 2*time.Second {
		t.Fatalf("W2 got %v %v after the release: not handed on when W1 gave up", l, took)
	}
	if s := lockState(t, rdb, locktest.Key("gone")); s.Token != l.Token() || l.Fence() <= h.Fence() {
		t.Fatalf("Redis records %+v; W2 holds fence %d after %d", s, l.Fence(), h.Fence())
	}
	// W2's grant goes to W1 again (queued anew), which gives up alone: the lock is free at once.
	ctx1, cancel1 = context.WithCancel(ctx)
	defer cancel1()
	w1 = wait(w1c, ctx1)
	locktest.Eventually(t, 5*time.Second, "W1 queued again", func() bool { return len(fairQueue(t, rdb, "gone")) == 1 })
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cancel1()
	if l := <-w1; l != nil {
		t.Fatal("W1 acquired although it gave up")
	}
	if lockHeld(t, rdb, locktest.Key("gone")) {
		t.Fatal("the lock stays held by a waiter that gave up")
	}
}

// A waiter that died while queued is handed the lock all the same (nothing tells Redis it is gone
// before its deadline); the grant expires after the waiter's TTL and the next waiter takes the
// lock, with a higher fence. Every key of the queue has a TTL.
func TestFair_handoff_deadWaiterGrantExpires(t *testing.T) {
	_, rdb, holder := setup(t)
	c := locktest.NewClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "dead", 10*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	// A dead waiter queued just now, as an attempt queues one: 500ms TTL, 5s queue timeout.
	member := "500\x005000\x00dead-waiter-token\x000\x00host 1 dead"
	rdb.ZAdd(ctx, locktest.Key("dead", "queue"), redis.Z{Score: float64(2 * time.Now().UnixMicro()), Member: member})
	rdb.PExpire(ctx, locktest.Key("dead", "queue"), 10*time.Second)
	got := acquireFair(t, ctx, c, "dead", 10*time.Second)
	locktest.Eventually(t, 5*time.Second, "waiter queued", func() bool { return len(fairQueue(t, rdb, "dead")) == 2 })
	for _, k := range rdb.Keys(ctx, "lockkit:{dead}*").Val() {
		if d := rdb.PTTL(ctx, k).Val(); d <= 0 {
			t.Fatalf("%s: PTTL %v, want a TTL", k, d)
		}
	}
	released := time.Now()
	_ = h.Release(ctx)
	dead := lockState(t, rdb, locktest.Key("dead"))
	if dead.Token != "dead-waiter-token" || dead.Fence <= h.Fence() {
		t.Fatalf("after the release Redis records %+v: not handed to the dead waiter", dead)
	}
	l := <-got
	took := time.Since(released)
	t.Logf("the live waiter took the lock %v after the release", took.Round(time.Millisecond))
	if took < 400*time.Millisecond || took > 3*time.Second {
		t.Fatalf("took the lock %v after the release; want after the dead waiter's 500ms TTL", took)
	}
	if l.Fence() <= dead.Fence {
		t.Fatalf("fence %d after the dead waiter's %d", l.Fence(), dead.Fence)
	}
	_ = l.Release(ctx)
}

// A grant message for another queueing of the waiter (an older one: that lease is gone) is
// ignored: the waiter does not hold a lock Redis does not record.
func TestFair_handoff_staleGrantIgnored(t *testing.T) {
	_, rdb, holder := setup(t)
	c := locktest.NewClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "stale", 10*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	res := make(chan error, 1)
	go func() {
		l, err := c.Acquire(wctx, "stale", 10*time.Second, core.Fair())
		if err == nil {
			_ = l.Release(ctx)
		}
		res <- err
	}()
	locktest.Eventually(t, 5*time.Second, "waiter queued and parked", func() bool {
		return len(fairQueue(t, rdb, "stale")) == 1 && core.WaitersParked(c) == 1
	})
	z := rdb.ZRangeWithScores(ctx, locktest.Key("stale", "queue"), 0, 0).Val()[0]
	epoch := int64(z.Score) / 2
	sum := sha1.Sum([]byte(fairQueue(t, rdb, "stale")[0]))
	msg := "g:" + hex.EncodeToString(sum[:]) + ":" + strconv.FormatInt(h.Fence()+1, 10) + ":" + strconv.FormatInt(epoch-1, 10)
	rdb.Publish(ctx, locktest.Key("stale", "released"), msg)
	if err := <-res; !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("after a stale grant: %v, want ErrNotAcquired (the waiter timed out)", err)
	}
	if n := rdb.ZCard(ctx, locktest.Key("stale", "queue")).Val(); n != 0 {
		t.Fatalf("%d waiters left in the queue", n)
	}
}

// replayRelease is a go-redis hook that sends every fair release script twice, as go-redis does
// when the first reply is lost.
type replayRelease struct{ replayed atomic.Int64 }

func (r *replayRelease) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *replayRelease) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (r *replayRelease) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// release_fair.lua: EVALSHA sha 3 lock queue deadlines token PUBLISH hold fence
		if a := cmd.Args(); err == nil && len(a) == 10 && a[2] == any(3) && a[7] == any("PUBLISH") {
			r.replayed.Add(1)
			return next(ctx, redis.NewCmd(ctx, a...))
		}
		return err
	}
}

// A release replayed after it handed the lock on answers "released" again and hands nothing more:
// the next waiter keeps the lock, the one after it keeps its place.
func TestFair_handoff_replayedReleaseHandsOnOnce(t *testing.T) {
	srv, rdb, _ := setup(t)
	rr := &replayRelease{}
	hr := srv.Client(t)
	hr.AddHook(rr)
	holder := locktest.NewClient(t, hr)
	c := locktest.NewClient(t, rdb, core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "replay", 10*time.Second, core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lock, 2)
	for i := range 2 {
		go func() {
			l, _ := c.Acquire(ctx, "replay", 10*time.Second, core.Fair())
			got <- l
		}()
		locktest.Eventually(t, 5*time.Second, "waiter queued", func() bool { return len(fairQueue(t, rdb, "replay")) == i+1 })
	}
	if err := h.Release(ctx); err != nil || rr.replayed.Load() != 1 {
		t.Fatalf("release: %v, replayed %d times", err, rr.replayed.Load())
	}
	l := <-got
	if s := lockState(t, rdb, locktest.Key("replay")); l == nil || s.Token != l.Token() || len(fairQueue(t, rdb, "replay")) != 1 {
		t.Fatalf("after a replayed release Redis records %+v, queue %v", s, fairQueue(t, rdb, "replay"))
	}
	_ = l.Release(ctx)
	if l := <-got; l != nil {
		_ = l.Release(ctx)
	}
}
