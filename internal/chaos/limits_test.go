package chaos_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"go.uber.org/goleak"
)

// A 1 MiB name (or guard key, or owner token) is refused before anything is sent, with a short error.
func TestLimits_hugeInputs_rejectedCleanly(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	huge := strings.Repeat("k", 1<<20)
	srv.ResetStats(t)
	cases := map[string]func() error{
		"name":  func() error { _, err := c.TryAcquire(ctx, huge, time.Second); return err },
		"owner": func() error { _, err := c.TryAcquire(ctx, "n", time.Second, core.WithOwner(huge)); return err },
		"wait":  func() error { _, err := c.Acquire(ctx, huge, time.Second, core.WithWait(time.Second)); return err },
	}
	for what, f := range cases {
		err := f()
		if !errors.Is(err, core.ErrInvalid) {
			t.Errorf("1 MiB %s: %v, want ErrInvalid", what, err)
		} else if len(err.Error()) > 200 {
			t.Errorf("1 MiB %s: error of %d bytes", what, len(err.Error()))
		}
	}
	if st := srv.CommandStats(t); st["evalsha"]+st["eval"] != 0 {
		t.Errorf("scripts sent for refused inputs: %v", st)
	}
}

// Names are binary-safe: every byte value, NUL included, works alone and all together; only a
// leading '}' is refused (it would empty the hash tag).
func TestLimits_binaryNames(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	names := []string{string(all)}
	for b := range 256 {
		names = append(names, string([]byte{byte(b)}), "x"+string([]byte{byte(b)})+"y")
	}
	for _, name := range names {
		l, err := c.TryAcquire(ctx, name, time.Second)
		if name[0] == '}' || name[0] == '@' { // '@' is reserved for namespaces
			if !errors.Is(err, core.ErrInvalid) {
				t.Errorf("name %q: %v, want ErrInvalid", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("name %q: %v", name, err)
		}
		if v, _ := srv.Do(t, "GET", locktest.Key(name)).(string); !ownedBy(v, l.Token()) {
			t.Fatalf("name %q: lock not stored under its key", name)
		}
		if _, err := c.TryAcquire(ctx, name, time.Second); !errors.Is(err, core.ErrNotAcquired) {
			t.Fatalf("name %q: second holder: %v", name, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("name %q: release: %v", name, err)
		}
	}
	// A waiter on the all-bytes name is woken through its release channel.
	holder, err := c.Acquire(ctx, string(all), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waiter := locktest.NewClient(t, srv.Client(t), core.WithRetryBackoff(10*time.Second, 20*time.Second))
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Acquire(ctx, string(all), time.Second, core.WithWait(5*time.Second))
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	locktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		m := srv.Do(t, "PUBSUB", "NUMSUB", locktest.Key(string(all), "released")).([]any)
		return m[1] == int64(1)
	})
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter on a binary name: %v", err)
	}
}

// TTLs from 10 ms to 24 h work; outside that range Acquire and Extend refuse them.
func TestLimits_TTLExtremes(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	for _, ttl := range []time.Duration{10 * time.Millisecond, 24 * time.Hour} {
		// A name per TTL: a 10 ms lock declared lost locally under load may still sit in Redis for
		// a few ms (a late renewal extended it), and a lost lock's Release sends nothing.
		// A reply slower than a 10 ms TTL (a first call's dial and script load, a loaded host) is
		// refused and given back by design: try a few times.
		var l *core.Lock
		var err error
		for range 5 {
			if l, err = c.TryAcquire(ctx, "ttl-"+ttl.String(), ttl); err == nil || errors.Is(err, core.ErrInvalid) {
				break
			}
		}
		if err != nil {
			t.Fatalf("TTL %v: %v", ttl, err)
		}
		pttl := srv.Do(t, "PTTL", l.Key()).(int64)
		// (Read after PTTL: a 10 ms lock lost under load is given back, which leaves the free
		// lock's 10 s marker, only after its context was cancelled.)
		lost := l.Context().Err() != nil
		if !lost && (pttl > ttl.Milliseconds() || pttl < ttl.Milliseconds()-1000 && ttl > time.Second) {
			t.Errorf("TTL %v: PTTL %d ms", ttl, pttl)
		}
		// A 10 ms lock may be lost under load (renewals every 3.3 ms): then Release says so.
		if err := l.Release(ctx); err != nil && !errors.Is(err, core.ErrNotHeld) {
			t.Fatalf("TTL %v: release: %v", ttl, err)
		}
	}
	l, err := c.TryAcquire(ctx, "ttl", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for _, ttl := range []time.Duration{-time.Second, 0, time.Millisecond, 10*time.Millisecond - 1, 24*time.Hour + 1, 1 << 62} {
		if _, err := c.TryAcquire(ctx, "other", ttl); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("acquire with TTL %v: %v", ttl, err)
		}
		if err := l.Extend(ctx, ttl); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("extend to TTL %v: %v", ttl, err)
		}
	}
}

// Closing a client that holds locks and has waiters parked releases every lock, cancels every lock
// context with ErrClosed, returns ErrClosed to every waiter and leaves no goroutine behind.
func TestLimits_closeWithLocksHeldAndWaitersParked(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	other := locktest.NewClient(t, srv.Client(t))
	busy, err := other.Acquire(ctx, "busy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Release(ctx)
	baseline := goleak.IgnoreCurrent()

	rdb := srv.Client(t)
	c, err := core.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	var locks []*core.Lock
	for i := range 20 {
		l, err := c.Acquire(ctx, "held-"+itoa(i), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	const waiters = 200
	var started atomic.Int32
	results := make(chan error, waiters)
	for range waiters {
		go func() {
			started.Add(1)
			_, err := c.Acquire(ctx, "busy", time.Second)
			results <- err
		}()
	}
	locktest.Eventually(t, 5*time.Second, "waiters to subscribe", func() bool {
		m := srv.Do(t, "PUBSUB", "NUMSUB", locktest.Key("busy", "released")).([]any)
		return started.Load() == waiters && m[1] == int64(1)
	})
	closed := time.Now()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		select {
		case err := <-results:
			if !errors.Is(err, core.ErrClosed) {
				t.Fatalf("waiter after Close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a waiter was not woken by Close")
		}
	}
	t.Logf("Close released 20 locks and woke %d waiters in %v", waiters, time.Since(closed))
	for _, l := range locks {
		if !errors.Is(context.Cause(l.Context()), core.ErrClosed) {
			t.Fatalf("lock context cause %v", context.Cause(l.Context()))
		}
		if v, _ := srv.Do(t, "GET", l.Key()).(string); ownedBy(v, l.Token()) {
			t.Fatalf("%s left held in Redis", l.Key())
		}
	}
	if _, err := c.TryAcquire(ctx, "x", time.Second); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("acquire after Close: %v", err)
	}
	_ = rdb.Close()
	goleak.VerifyNone(t, baseline)
}
