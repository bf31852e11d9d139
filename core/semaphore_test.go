package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestPermits_limitFencesKeysAndRoundTrips(t *testing.T) {
	srv, rdb, c := setup(t)
	ctx := context.Background()
	var held []*core.Lock
	var last int64
	for i := range 4 {
		p, err := c.TryAcquire(ctx, "pool", 5*time.Second, core.Permits(4))
		if err != nil {
			t.Fatalf("permit %d: %v", i, err)
		}
		if p.Fence() <= last || p.Limit() != 4 || p.Holds() != 1 || p.Key() != locktest.Key("pool", "permits") {
			t.Fatalf("permit %d: fence %d (last %d) limit %d holds %d key %q", i, p.Fence(), last, p.Limit(), p.Holds(), p.Key())
		}
		last = p.Fence()
		held = append(held, p)
	}
	_, err := c.TryAcquire(ctx, "pool", 5*time.Second, core.Permits(4))
	var na *core.NotAcquiredError
	if !errors.As(err, &na) || na.RetryAfter <= 4*time.Second || na.RetryAfter > 5*time.Second {
		t.Fatalf("fifth permit: %v (%+v), want NotAcquiredError with RetryAfter ~5s", err, na)
	}
	// Every key written has a TTL.
	for _, k := range []string{locktest.Key("pool", "permits"), locktest.Key("pool", "permits", "limits"), locktest.Key("pool", "permits", "fences"), locktest.Key("pool")} {
		if d := rdb.PTTL(ctx, k).Val(); d <= 0 {
			t.Fatalf("%s: PTTL %v, want a TTL", k, d)
		}
	}
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held[0].Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if c := context.Cause(held[0].Context()); !errors.Is(c, core.ErrReleased) {
		t.Fatalf("cause %v", c)
	}
	// Warm: one permit costs 2 round trips (acquire + release).
	srv.ResetStats(t)
	p, err := c.TryAcquire(ctx, "pool", 5*time.Second, core.Permits(4))
	if err != nil {
		t.Fatal(err)
	}
	if p.Fence() <= last {
		t.Fatalf("fence %d not above %d", p.Fence(), last)
	}
	if d, err := p.TTL(ctx); err != nil || d <= 4*time.Second {
		t.Fatalf("TTL %v %v", d, err)
	}
	srv.ResetStats(t)
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, h := range held[1:] {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st := srv.CommandStats(t); st["evalsha"] != 4 || st["eval"] != 0 {
		t.Fatalf("4 releases: %v", st)
	}
	if n := rdb.Exists(ctx, locktest.Key("pool", "permits"), locktest.Key("pool", "permits", "limits"), locktest.Key("pool", "permits", "fences")).Val(); n != 0 {
		t.Fatalf("%d semaphore keys left after the last release", n)
	}
	// One name, one lock: the last permit's release freed the name for a lock, whose hold keeps
	// permits out, and the fences go on in one sequence.
	l, err := c.TryAcquire(ctx, "pool", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= p.Fence() {
		t.Fatalf("the lock's fence %d is not above the last permit's %d", l.Fence(), p.Fence())
	}
	if _, err := c.TryAcquire(ctx, "pool", time.Second, core.Permits(1)); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a permit while the lock holds: %v, want ErrNotAcquired", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p, err = c.TryAcquire(ctx, "pool", time.Second, core.Permits(1))
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Release(ctx)
}

func TestPermits_roundTrips(t *testing.T) {
	srv, _, c := setup(t)
	ctx := context.Background()
	warm, err := c.Acquire(ctx, "rt", time.Second, core.Permits(2))
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Release(ctx)
	srv.ResetStats(t)
	p, err := c.Acquire(ctx, "rt", time.Second, core.Permits(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st := srv.CommandStats(t); st["evalsha"] != 2 || st["eval"] != 0 {
		t.Fatalf("acquire+release: %v, want exactly 2 EVALSHA", st)
	}
}

// Callers passing different limits: a permit is granted only while the holders number fewer than
// the caller's limit and every holder's limit.
func TestPermits_differentLimits(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	take := func(limit int) (*core.Lock, error) {
		return c.TryAcquire(ctx, "mixed", 5*time.Second, core.Permits(limit))
	}
	a, err := take(2) // a allows 2 holders
	if err != nil {
		t.Fatal(err)
	}
	if _, err := take(5); err != nil { // 2nd holder: fine for a (2) and for 5
		t.Fatal(err)
	}
	if _, err := take(5); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("third holder while a (limit 2) holds: %v, want ErrNotAcquired", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Now only limit-5 holders: a third one is fine, a caller with limit 2 is not (2 hold already).
	if _, err := take(5); err != nil {
		t.Fatal(err)
	}
	if _, err := take(2); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("limit-2 caller with 2 holders: %v, want ErrNotAcquired", err)
	}
	if _, err := take(1); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("limit-1 caller with holders: %v, want ErrNotAcquired", err)
	}
}

func TestPermits_invalid(t *testing.T) {
	srv, rdb, c := setup(t)
	ctx := context.Background()
	for name, opts := range map[string][]core.AcquireOption{
		"zero":  {core.Permits(-1)},
		"huge":  {core.Permits(100001)},
		"owner": {core.Permits(2), core.WithOwner("x")},
		"guard": {core.Permits(2), core.WithGuard("g:{s}")},
	} {
		if _, err := c.TryAcquire(ctx, "s", time.Second, opts...); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	p, err := c.Acquire(ctx, "s", time.Second, core.Permits(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ReleaseSet(ctx, "x:{s}", []byte("v"), time.Second); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("ReleaseSet on a permit: %v, want ErrInvalid", err)
	}
	_ = p.Release(ctx)
	rl, err := core.NewRedlock([]redis.UniversalClient{rdb, srv.Client(t), redistest.Start(t).Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close(ctx)
	if _, err := rl.Acquire(ctx, "s", time.Second, core.Permits(2)); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("Redlock semaphore: %v, want ErrInvalid", err)
	}
}

func TestPermits_extendMaxHoldAndFairKeysExpire(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	p, err := c.Acquire(ctx, "ext", time.Second, core.Permits(2), core.WithMaxHold(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Extend(ctx, 8*time.Second); err != nil {
		t.Fatal(err)
	}
	if d, err := p.TTL(ctx); err != nil || d <= 7*time.Second {
		t.Fatalf("TTL after Extend(8s): %v %v", d, err)
	}
	if err := p.Extend(ctx, 2*time.Second); err != nil { // never shortens the lease
		t.Fatal(err)
	}
	if d, _ := p.TTL(ctx); d <= 7*time.Second {
		t.Fatalf("Extend to a shorter TTL cut the lease to %v", d)
	}
	<-p.Context().Done() // WithMaxHold ends the hold and gives the permit back
	if cause := context.Cause(p.Context()); !errors.Is(cause, core.ErrMaxHold) {
		t.Fatalf("cause %v, want ErrMaxHold", cause)
	}
	locktest.Eventually(t, 2*time.Second, "permit given back", func() bool { return rdb.Exists(ctx, locktest.Key("ext", "permits")).Val() == 0 })

	// Fair mode: the queue keys expire too.
	h, err := c.Acquire(ctx, "fq", 5*time.Second, core.Permits(1), core.Fair())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	// The waiter stays until the keys were checked (a short deadline let it leave first on a loaded
	// host, and its keys were gone by the check), then gives up.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = c.Acquire(wctx, "fq", time.Second, core.Permits(1), core.Fair()) }()
	locktest.Eventually(t, 2*time.Second, "waiter queued", func() bool { return int64(len(queued(t, rdb, locktest.Key("fq", "permits", "queue")))) == 1 })
	if d := rdb.PTTL(ctx, locktest.Key("fq", "permits", "queue")).Val(); d <= 0 {
		t.Fatalf("the queue: PTTL %v, want a TTL", d)
	}
	// The deadlines hash is written when a waiter refreshes its place (its next attempt), which a
	// loaded host may not have reached yet: absent is fine, present without a TTL is not.
	if d := rdb.PTTL(ctx, locktest.Key("fq", "permits", "queue", "deadlines")).Val(); d == -1 {
		t.Fatal("the queue's deadlines: no TTL")
	}
	cancel()
	locktest.Eventually(t, 2*time.Second, "waiter left the queue", func() bool { return int64(len(queued(t, rdb, locktest.Key("fq", "permits", "queue")))) == 0 })
}

// The watchdog renews permits and locks in the same pipelined batches (one goroutine, one round
// trip for both). A round takes every renewal due within a quarter of the renewal interval: the
// TTL (1.5 s: renewals every 500 ms, 125 ms apart at most in one round) keeps a second acquisition
// slowed by a loaded host (one took 37 ms under CI at a 300 ms TTL, whose rounds span 25 ms) in
// the first one's round.
func TestPermits_renewedInTheLocksBatch(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "batch-lock", 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Now()
	p, err := c.Acquire(ctx, "batch-sem", 1500*time.Millisecond, core.Permits(2))
	if err != nil {
		t.Fatal(err)
	}
	gap := time.Since(took)
	locktest.Eventually(t, 5*time.Second, "renewals of both", func() bool { _, n := core.RenewStats(c); return n >= 2 })
	pipelines, scripts := core.RenewStats(c)
	if pipelines != 1 || scripts != 2 {
		t.Fatalf("first renewal round: %d pipelines with %d scripts, want 1 with 2 (lock and permit together; acquired %v apart)",
			pipelines, scripts, gap)
	}
	locktest.Eventually(t, 5*time.Second, "more renewal rounds", func() bool { n, _ := core.RenewStats(c); return n >= 4 })
	for _, x := range []*core.Lock{l, p} {
		if err := x.Context().Err(); err != nil {
			t.Fatalf("%s lost: %v", x.Key(), context.Cause(x.Context()))
		}
		if d, err := x.TTL(ctx); err != nil || d < 100*time.Millisecond {
			t.Fatalf("%s TTL %v %v after renewals", x.Key(), d, err)
		}
		_ = x.Release(ctx)
	}
}
