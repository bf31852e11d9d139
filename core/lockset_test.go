package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A set is all or nothing: when one name is taken by another owner, nothing of the set is taken
// (and nothing is left behind); when none is, every name is the set's, each with its own fence.
func TestAcquireAll_allOrNothing(t *testing.T) {
	_, rdb, c := setup(t)
	other := locktest.NewClient(t, rdb)
	ctx := context.Background()
	b, err := other.Acquire(ctx, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.TryAcquireAll(ctx, []string{"a", "b", "c"}, time.Minute)
	var na *core.NotAcquiredError
	if !errors.As(err, &na) || na.Name != "b" || na.RetryAfter <= 0 {
		t.Fatalf("TryAcquireAll with b taken: %v, want NotAcquired naming b", err)
	}
	for _, n := range []string{"a", "c"} {
		if lockHeld(t, rdb, locktest.Key(n)) {
			t.Fatalf("%s was left held by a failed set", n)
		}
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.TryAcquireAll(ctx, []string{"a", "b", "c"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	locks := s.Locks()
	if len(locks) != 3 {
		t.Fatalf("%d locks", len(locks))
	}
	for i, n := range []string{"a", "b", "c"} {
		st := lockState(t, rdb, locktest.Key(n))
		if locks[i].Name() != n || st.Token != locks[i].Token() || st.Fence != locks[i].Fence() || locks[i].Token() != locks[0].Token() {
			t.Fatalf("lock %d: name %q fence %d; Redis %+v", i, locks[i].Name(), locks[i].Fence(), st)
		}
	}
	if locks[1].Fence() <= b.Fence() {
		t.Fatalf("b's fence %d, not above the last holder's %d", locks[1].Fence(), b.Fence())
	}
	if _, err := other.TryAcquire(ctx, "c", time.Second); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("c while the set holds it: %v", err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if lockHeld(t, rdb, locktest.Key(n)) {
			t.Fatalf("%s still held after the set's release", n)
		}
	}
	if !errors.Is(context.Cause(s.Context()), core.ErrReleased) {
		t.Fatalf("set context cause %v", context.Cause(s.Context()))
	}
}

// Two owners taking overlapping sets in opposite orders never wait on each other for ever.
func TestAcquireAll_overlappingSetsInOppositeOrders_noDeadlock(t *testing.T) {
	srv, _, _ := setup(t)
	a := locktest.NewClient(t, srv.Client(t), core.WithRetryBackoff(5*time.Millisecond, 50*time.Millisecond))
	b := locktest.NewClient(t, srv.Client(t), core.WithRetryBackoff(5*time.Millisecond, 50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var held atomic.Int32
	var wg sync.WaitGroup
	run := func(c *core.Client, names []string) {
		defer wg.Done()
		for range 50 {
			err := c.DoAll(ctx, names, 5*time.Second, func(context.Context) error {
				if held.Add(1) != 1 {
					t.Error("two sets sharing a name held at once")
				}
				time.Sleep(time.Millisecond)
				held.Add(-1)
				return nil
			})
			if err != nil {
				t.Errorf("DoAll %v: %v", names, err)
				return
			}
		}
	}
	wg.Add(4)
	go run(a, []string{"x", "y", "z"})
	go run(b, []string{"z", "y", "x"})
	go run(a, []string{"y", "x"})
	go run(b, []string{"z", "x"})
	wg.Wait()
}

// A waiting set is woken by the release of the name it found taken, not by its fallback backoff.
func TestAcquireAll_wokenByRelease(t *testing.T) {
	_, rdb, holder := setup(t)
	c := locktest.NewClient(t, rdb, core.WithRetryBackoff(10*time.Second, 20*time.Second)) // polls would be too late
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := holder.Acquire(ctx, "q2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		s, err := c.AcquireAll(ctx, []string{"q1", "q2"}, time.Minute)
		if err == nil {
			err = s.Release(ctx)
		}
		got <- err
	}()
	locktest.Eventually(t, 5*time.Second, "the set waits on q2's channel", func() bool { return subscribers(t, rdb, "q2") == 1 })
	released := time.Now()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d > 2*time.Second {
			t.Fatalf("the set took %v after the release", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting set was not woken by the release")
	}
}

// The set's context ends when any of its locks is lost; Release then releases the others and says
// one was lost; DoAll reports ErrLost.
func TestAcquireAll_oneLost_contextEndsAndReleaseGivesBackTheRest(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	s, err := c.AcquireAll(ctx, []string{"l1", "l2", "l3"}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, locktest.Key("l2")) // behind the holder's back
	select {
	case <-s.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the set's context outlived the loss of one of its locks")
	}
	if !errors.Is(context.Cause(s.Context()), core.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", context.Cause(s.Context()))
	}
	err = s.Release(ctx)
	if !errors.Is(err, core.ErrLost) || !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Release after a loss: %v, want ErrLost", err)
	}
	for _, n := range []string{"l1", "l3"} {
		if lockHeld(t, rdb, locktest.Key(n)) {
			t.Fatalf("%s still held after Release", n)
		}
	}
	err = c.DoAll(ctx, []string{"d1", "d2"}, 300*time.Millisecond, func(ctx context.Context) error {
		rdb.Del(ctx, locktest.Key("d1"))
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, core.ErrLost) {
		t.Fatalf("DoAll with a lock lost: %v", err)
	}
}

// The set's locks are renewed together: one pipeline per round for the whole set.
func TestAcquireAll_renewedInOneBatch(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("r%d", i)
	}
	s, err := c.AcquireAll(ctx, names, 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(ctx)
	locktest.Eventually(t, 5*time.Second, "three renewal rounds", func() bool {
		_, scripts := core.RenewStats(c)
		return scripts >= 30
	})
	pipelines, scripts := core.RenewStats(c)
	if scripts/pipelines < 10 {
		t.Fatalf("%d renewal scripts in %d pipelines: the set was not renewed in one batch", scripts, pipelines)
	}
}

// A lock acquired with the set's context re-enters the set's lock of that name.
func TestAcquireAll_reentryThroughTheSetsContext(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	s, err := c.AcquireAll(ctx, []string{"e1", "e2"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(ctx)
	for i, n := range []string{"e1", "e2"} {
		in, err := c.TryAcquire(s.Context(), n, time.Second)
		if err != nil || in.Holds() == 1 || in.Fence() != s.Locks()[i].Fence() {
			t.Fatalf("re-entry of %s: %v", n, err)
		}
		_ = in.Release(ctx)
	}
	// The set's context carries the set, so that a function run under it (DoAll, an adapter's
	// WithKeys) reaches every fence.
	if got, ok := core.SetFromContext(s.Context()); !ok || got != s {
		t.Fatalf("SetFromContext(set's context) = %p, %v; want the set %p", got, ok, s)
	}
	inner, cancel := context.WithCancel(s.Context())
	defer cancel()
	if got, ok := core.SetFromContext(inner); !ok || got != s {
		t.Fatal("SetFromContext of a derived context lost the set")
	}
	if _, ok := core.SetFromContext(ctx); ok {
		t.Fatal("SetFromContext found a set in a context without one")
	}
	err = c.DoAll(ctx, []string{"e3", "e4"}, time.Minute, func(ctx context.Context) error {
		got, ok := core.SetFromContext(ctx)
		if !ok || len(got.Locks()) != 2 || got.Locks()[0].Name() != "e3" || got.Locks()[1].Fence() == 0 {
			t.Errorf("DoAll's function sees set %v, %v", got, ok)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Invalid sets are refused before anything is sent; Redlock refuses sets.
func TestAcquireAll_invalid(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	_, _, c := setup(t)
	ctx := context.Background()
	for _, tc := range []struct {
		names []string
		opts  []core.AcquireOption
	}{
		{nil, nil},
		{[]string{"a", "a"}, nil},
		{[]string{"a", ""}, nil},
		{[]string{"a"}, []core.AcquireOption{core.Fair()}},
		{[]string{"a"}, []core.AcquireOption{core.WithOwner("x")}},
		{[]string{"a"}, []core.AcquireOption{core.Permits(2)}},
		{[]string{"a"}, []core.AcquireOption{core.Read()}},
		{[]string{"a", "b"}, []core.AcquireOption{core.Write()}},
	} {
		if _, err := c.TryAcquireAll(ctx, tc.names, time.Second, tc.opts...); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", tc.names, err)
		}
	}
	rl, err := core.NewRedlock([]redis.UniversalClient{srvs[0].Client(t), srvs[1].Client(t), srvs[2].Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close(ctx)
	if _, err := rl.TryAcquireAll(ctx, []string{"a", "b"}, time.Second); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("Redlock set: %v, want ErrInvalid", err)
	}
	var nilSet *core.LockSet
	if nilSet.Locks() != nil || nilSet.Context().Err() == nil || !errors.Is(nilSet.Release(ctx), core.ErrNotHeld) {
		t.Fatal("a nil *LockSet's methods")
	}
}

// On a cluster the names of a set may live in different slots: taken slot by slot, all or nothing.
func TestCluster_acquireAll_acrossSlots(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb := cl.Client(t)
	c := locktest.NewClient(t, rdb)
	other := locktest.NewClient(t, cl.Client(t))
	ctx := context.Background()
	names := []string{"acct:1", "acct:2", "acct:3", "acct:4"} // four hash tags: several slots
	b, err := other.Acquire(ctx, "acct:3", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquireAll(ctx, names, time.Minute); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("with acct:3 taken: %v", err)
	}
	for _, n := range names {
		if n != "acct:3" && lockHeld(t, rdb, locktest.Key(n)) {
			t.Fatalf("%s left held by a failed set", n)
		}
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = b.Release(ctx)
	}()
	s, err := c.AcquireAll(ctx, names, time.Minute, core.WithWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range s.Locks() {
		if st := lockState(t, rdb, l.Key()); st.Token != l.Token() || l.Name() != names[i] {
			t.Fatalf("%s: %+v", l.Name(), st)
		}
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
