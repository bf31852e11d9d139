package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The watchdog's renewals against what re-entries, co-owners and Extend do to a lock's TTL (the
// holes of issue #16 there; each test failed on the code before its fix).

// holdsFor checks, every few milliseconds for d, that l's context is live only while Redis holds
// the lock for l's token: a holder must never believe it holds a lock Redis gave up.
func holdsFor(t *testing.T, rdb *redis.Client, l *core.Lock, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		held := lockState(t, rdb, l.Key()).Token == l.Token()
		if !held && l.Context().Err() == nil {
			t.Fatalf("Redis no longer holds %s for its holder, whose context is live", l.Name())
		}
	}
}

// Defect 1: a co-owner re-entering through WithOwner with a short TTL must not shrink the TTL the
// first holder relies on, through its renewals or its release.
func TestSafety_coOwnerShortTTL_neverShrinksTheLock(t *testing.T) {
	srv, rdb, a := setup(t)
	b := locktest.NewClient(t, srv.Client(t))
	c := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	la, err := a.Acquire(ctx, "x", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, "x", 100*time.Millisecond, core.WithOwner(la.Token()))
	if err != nil {
		t.Fatal(err)
	}
	// B's watchdog renews every ~33ms with its 100ms TTL; none of that may shorten A's 10s.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if pttl := rdb.PTTL(ctx, la.Key()).Val(); pttl < 9*time.Second {
			t.Fatalf("a co-owner's renewal shrank the lock's TTL to %v", pttl)
		}
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	holdsFor(t, rdb, la, 300*time.Millisecond)
	if _, err := c.TryAcquire(ctx, "x", time.Second); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a third owner got the lock while its holder is live: %v", err)
	}
}

// Defect 2: an Extend to a short TTL racing a renewal in flight with the old, long TTL: the
// renewal's late reply must not leave the holder believing it holds the lock past what Redis
// keeps.
func TestSafety_extendRacingRenewal_validityMatchesRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	gate := &pipelineGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	held := srv.Client(t)
	held.AddHook(gate)
	c := locktest.NewClient(t, held)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "x", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select { // the first renewal (at 1s) ran in Redis; its reply is held back
	case <-gate.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no renewal")
	}
	if err := l.Extend(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	holdsFor(t, rdb, l, time.Second)
	if pttl := rdb.PTTL(ctx, l.Key()).Val(); pttl < 250*time.Millisecond {
		t.Fatalf("PTTL %v after Extend(300ms)", pttl)
	}
}

// pipelineGate holds back the reply of the first pipeline that ran without errors (a watchdog
// renewal; a first try answered NOSCRIPT does not count) until release.
type pipelineGate struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *pipelineGate) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (g *pipelineGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *pipelineGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if c.Err() != nil {
				return err
			}
		}
		first := false
		g.once.Do(func() { first = true })
		if first {
			g.entered <- struct{}{}
			<-g.release
		}
		return err
	}
}

// Defect 3: short re-entries through a held lock's context, more often than its renewal
// interval, must not postpone the outer lock's renewal until it is reported lost.
func TestSafety_frequentShortReentries_doNotStarveRenewal(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	outer, err := c.Acquire(ctx, "x", 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		inner, err := c.Acquire(outer.Context(), "x", 20*time.Millisecond)
		if errors.Is(err, core.ErrUnavailable) && outer.Context().Err() == nil {
			continue // a reply slower than the 20 ms TTL (a loaded host): refused by design
		}
		if err != nil {
			t.Fatalf("re-entry: %v (outer: %v)", err, context.Cause(outer.Context()))
		}
		if err := inner.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-outer.Context().Done():
			t.Fatalf("outer lock ended while Redis was healthy: %v", context.Cause(outer.Context()))
		case <-time.After(180 * time.Millisecond):
		}
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// replayHook runs the next script call twice, with between() in the middle, and answers the
// second run's reply: what a go-redis retry after a lost reply does.
type replayHook struct {
	mu      sync.Mutex
	between func()
	done    bool
}

func (h *replayHook) arm(between func()) { h.mu.Lock(); h.between = between; h.mu.Unlock() }
func (h *replayHook) fired() bool        { h.mu.Lock(); defer h.mu.Unlock(); return h.done }

func (h *replayHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *replayHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		between := h.between
		if between != nil && strings.HasPrefix(cmd.Name(), "eval") {
			h.between = nil
			h.done = true
		} else {
			between = nil
		}
		h.mu.Unlock()
		if between == nil {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil { // e.g. NOSCRIPT: go-redis sends EVAL next
			h.mu.Lock()
			h.between, h.done = between, false
			h.mu.Unlock()
			return err
		}
		between()
		return next(ctx, cmd)
	}
}
func (h *replayHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// loseReplyHook lets the next script call run in Redis and then reports its reply lost.
type loseReplyHook struct{ armed, ran atomic.Bool }

func (h *loseReplyHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseReplyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && strings.HasPrefix(cmd.Name(), "eval") && h.armed.Swap(false) {
			h.ran.Store(true)
			cmd.SetErr(context.DeadlineExceeded)
			return context.DeadlineExceeded
		}
		return err
	}
}
func (h *loseReplyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
