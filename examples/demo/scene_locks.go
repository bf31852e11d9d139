package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
)

// sceneContention: three replicas (three core.Clients, each with its own connections, as three
// processes would have) take one lock in turns. A waiter is woken by the holder's release message;
// the fallback retry is set to a second or more, so a quick hand-over can only come from the wake.
func sceneContention(ctx context.Context, s *scene) error {
	const (
		name     = "demo"
		replicas = 3
		rounds   = 3
		ttl      = 5 * time.Second
		hold     = 150 * time.Millisecond // the work done under the lock
		pause    = 60 * time.Millisecond  // a replica's pause between its turns, so that waiters go first
		backoff  = 2 * time.Second        // WithRetryBackoff min: the first fallback retry comes after backoff/2..backoff
	)
	type replica struct {
		c        *core.Client
		attempts int  // of the last acquisition, set by the hook on the replica's goroutine
		woken    bool // whether the acquiring attempt followed a release message
	}
	reps := make([]*replica, replicas)
	for i := range reps {
		r := &replica{}
		hook := core.Hook{Attempt: func(_ context.Context, info core.WaitInfo) {
			if info.Acquired {
				r.attempts, r.woken = info.Attempts, info.Woken
			}
		}}
		c, _, err := s.newLocks(core.WithRetryBackoff(backoff, 2*backoff), core.WithHook(hook))
		if err != nil {
			return err
		}
		r.c = c
		reps[i] = r
	}
	s.logf("3 replicas take lock %q %d times each, hold it %v, TTL %v; fallback retry ≥ %v",
		name, rounds, hold, ttl, backoff/2)

	var (
		mu          sync.Mutex
		holder      int // the replica holding the lock, 0 for none
		overlaps    int
		fences      []int64
		releasedAt  time.Time
		releasedBy  int
		latencies   []time.Duration
		waited      int // acquisitions that had to wait
		woken       int // ... and were woken by a release message
		subscribing int // ... or found it free on the retry after subscribing
	)
	turn := func(ctx context.Context, i int, r *replica) error {
		ctx, span := s.tracing.tracer.Start(ctx, fmt.Sprintf("replica %d turn", i+1))
		defer span.End()
		l, err := r.c.Acquire(ctx, name, ttl)
		at := time.Now()
		if err != nil {
			return err
		}
		mu.Lock()
		if holder != 0 {
			overlaps++
		}
		holder = i + 1
		line := fmt.Sprintf("replica %d acquired   fence %d", i+1, l.Fence())
		if len(fences) > 0 {
			line += fmt.Sprintf(" (+%d)", l.Fence()-fences[len(fences)-1])
		}
		fences = append(fences, l.Fence())
		switch {
		case r.woken:
			waited++
			woken++
			lat := at.Sub(releasedAt)
			latencies = append(latencies, lat)
			line += fmt.Sprintf("   woken %s after replica %d's release", fmtDur(lat), releasedBy)
		case r.attempts == 2:
			// The release came while the waiter was subscribing to the release channel; the attempt
			// it makes once subscribed found the lock free.
			waited++
			subscribing++
			line += "   on its retry right after subscribing (released meanwhile)"
		case r.attempts > 2:
			waited++
			line += fmt.Sprintf("   after %d attempts, not woken: the fallback retry", r.attempts)
		default:
			line += "   (free: first attempt)"
		}
		s.logf("%s", line)
		mu.Unlock()

		sleep(l.Context(), hold)
		mu.Lock()
		holder, releasedAt, releasedBy = 0, time.Now(), i+1
		mu.Unlock()
		return l.Release(ctx)
	}

	var wg sync.WaitGroup
	errs := make(chan error, replicas)
	for i, r := range reps {
		wg.Go(func() {
			for range rounds {
				if err := turn(ctx, i, r); err != nil {
					errs <- fmt.Errorf("replica %d: %w", i+1, err)
					return
				}
				if !sleep(ctx, pause) {
					errs <- ctx.Err()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(slices.Collect(chanSeq(errs))...); err != nil {
		return err
	}

	s.check(overlaps == 0 && len(fences) == replicas*rounds,
		"%d acquisitions, never two holders at once", len(fences))
	increasing := len(fences) > 0
	for i := 1; i < len(fences); i++ {
		increasing = increasing && fences[i] > fences[i-1]
	}
	s.check(increasing, "fencing tokens strictly increasing, %d → %d", fences[0], fences[len(fences)-1])
	also := ""
	if subscribing > 0 {
		also = fmt.Sprintf(", %d on the retry after subscribing", subscribing)
	}
	s.check(woken > 0 && woken+subscribing == waited,
		"%d/%d waiters got the lock on an attempt woken by the release message%s; none by the fallback retry", woken, waited, also)
	slices.Sort(latencies)
	if len(latencies) > 0 {
		maxLat := latencies[len(latencies)-1]
		s.check(maxLat < backoff/2, "hand-over latency median %s, max %s, well below the fallback retry (≥ %v)",
			fmtDur(latencies[len(latencies)/2]), fmtDur(maxLat), backoff/2)
	} else {
		s.check(false, "hand-over latency measured")
	}
	return nil
}

// chanSeq ranges over a closed channel.
func chanSeq[T any](c <-chan T) func(func(T) bool) {
	return func(yield func(T) bool) {
		for v := range c {
			if !yield(v) {
				return
			}
		}
	}
}

// sceneLost: replica 1 holds a lock whose watchdog renews it; someone deletes the key behind its
// back; the next renewal finds the lock gone and cancels the holder's context, with a
// *core.LostError as its cause. Replica 2 takes the lock with a higher fence, and the storage,
// which checks fences, rejects a late write by replica 1.
func sceneLost(ctx context.Context, s *scene) error {
	const (
		name  = "lost-demo"
		ttl   = 1200 * time.Millisecond
		every = ttl / 3   // the watchdog's renewal interval (default ratio 1/3)
		grace = every / 2 // when to delete the key after a renewal
	)
	renewed := make(chan core.HoldInfo, 16)
	hook := core.Hook{Renewed: func(_ context.Context, info core.HoldInfo) {
		select {
		case renewed <- info:
		default:
		}
	}}
	c1, admin, err := s.newLocks(core.WithHook(hook))
	if err != nil {
		return err
	}
	c2, _, err := s.newLocks()
	if err != nil {
		return err
	}

	ctx1, span := s.tracing.tracer.Start(ctx, "replica 1 holds "+name)
	defer span.End()
	l1, err := c1.Acquire(ctx1, name, ttl)
	if err != nil {
		return err
	}
	acquired := time.Now()
	s.logf("replica 1 acquired %q   fence %d, TTL %v: the watchdog renews it every %v", name, l1.Fence(), ttl, every)
	n := 0
	for n < 4 {
		select {
		case info := <-renewed:
			n++
			ok := "renewed"
			if !info.Renewed {
				ok = fmt.Sprintf("renewal failed: %v", info.Err)
			}
			s.logf("  +%-6s watchdog: %s (round trip %s)", fmtMs(time.Since(acquired))[1:], ok, fmtDur(info.Duration))
		case <-l1.Context().Done():
			return fmt.Errorf("lock lost before the key was deleted: %w", context.Cause(l1.Context()))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	heldPast := time.Since(acquired)
	s.check(heldPast > ttl, "the watchdog kept the lock %s, past its %v TTL", fmtDur(heldPast), ttl)

	sleep(ctx, grace)
	deleted := time.Now()
	if err := admin.Del(ctx, l1.Key()).Err(); err != nil {
		return err
	}
	s.logf("  +%-6s DEL %s behind the holder's back (an operator, a failover, a bug)", fmtMs(deleted.Sub(acquired))[1:], l1.Key())
	t := time.NewTimer(3 * every)
	defer t.Stop()
	select {
	case <-l1.Context().Done():
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	detected := time.Since(deleted)
	cause := context.Cause(l1.Context())
	s.logf("  +%-6s replica 1's lock context is cancelled; context.Cause: %v", fmtMs(time.Since(acquired))[1:], cause)
	var lost *core.LostError
	s.check(errors.As(cause, &lost) && errors.Is(cause, core.ErrLost) && lost.Reason == "not_owner",
		"the cause is a *core.LostError matching core.ErrLost, reason %q", reason(lost))
	s.check(l1.Context().Err() != nil && detected <= every,
		"noticed %s after the DEL, within one renewal interval (%v)", fmtDur(detected), every)

	ctx2, span2 := s.tracing.tracer.Start(ctx, "replica 2 takes over "+name)
	defer span2.End()
	l2, err := c2.TryAcquire(ctx2, name, ttl)
	if err != nil {
		s.check(false, "replica 2 takes the lock at once: %v", err)
		return nil
	}
	defer func() { _ = l2.Release(context.WithoutCancel(ctx)) }()
	s.check(l2.Fence() > l1.Fence(), "replica 2 takes the lock at once, fence %d > %d", l2.Fence(), l1.Fence())

	var db fencedStore
	err2 := db.write(l2.Fence(), "written by replica 2")
	err1 := db.write(l1.Fence(), "late write by replica 1")
	s.logf("storage: replica 2 writes with its fence: %s", okOr(err2))
	s.logf("storage: replica 1 writes late (after a GC pause, say) with its old fence: %s", okOr(err1))
	s.check(err2 == nil && errors.Is(err1, errStaleFence), "the storage rejects replica 1's stale fence, keeps %q", db.value)

	rerr := l1.Release(ctx1)
	s.check(errors.Is(rerr, core.ErrNotHeld), "replica 1's Release returns ErrNotHeld and deletes nothing: %s",
		strings.ReplaceAll(fmt.Sprint(rerr), "\n", "; "))
	return nil
}

func reason(e *core.LostError) string {
	if e == nil {
		return "(none)"
	}
	return e.Reason
}

func okOr(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

var errStaleFence = errors.New("rejected: stale fencing token")

// fencedStore is a resource that protects itself with fencing tokens: it remembers the highest
// fence it has seen and refuses writes carrying a lower one.
type fencedStore struct {
	mu    sync.Mutex
	fence int64
	value string
}

func (f *fencedStore) write(fence int64, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fence < f.fence {
		return fmt.Errorf("%w %d < %d", errStaleFence, fence, f.fence)
	}
	f.fence, f.value = fence, value
	return nil
}
