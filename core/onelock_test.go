package core_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// kinds are the kinds of hold of a name, as Inspect names them, with the options that take each.
var kinds = []struct {
	mode string
	opts []core.AcquireOption
}{
	{"lock", nil},
	{"lock", []core.AcquireOption{core.Fair()}},
	{"write", []core.AcquireOption{core.Write()}},
	{"read", []core.AcquireOption{core.Read()}},
	{"permit", []core.AcquireOption{core.Permits(3)}},
}

// shares reports whether two holds of these modes may be held together: reads with reads and
// permits with permits; every other pair excludes each other.
func shares(a, b string) bool { return a == b && (a == "read" || a == "permit") }

func kindName(i int) string {
	if i == 1 {
		return "fair"
	}
	return kinds[i].mode
}

// One name, one lock: for every pair of kinds, a hold of the first decides whether the second is
// granted (only reads with reads and permits with permits), Inspect reports the name held in the
// first's mode, and once it is released the second is granted with a fence above the first's.
func TestOneLock_kindsExcludeEachOther(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	for i, a := range kinds {
		for j, b := range kinds {
			t.Run(kindName(i)+"/"+kindName(j), func(t *testing.T) {
				name := "one/" + kindName(i) + "-" + kindName(j)
				la, err := c.TryAcquire(ctx, name, 10*time.Second, a.opts...)
				if err != nil {
					t.Fatalf("%s: %v", kindName(i), err)
				}
				info, err := c.Inspect(ctx, name)
				if err != nil || !info.Held || info.Mode != a.mode || len(info.Holders) != 1 ||
					info.Holders[0].Mode != a.mode || info.Holders[0].Fence != la.Fence() || info.Fence != la.Fence() {
					t.Fatalf("Inspect while a %s holds: %+v, %v", a.mode, info, err)
				}
				lb, err := c.TryAcquire(ctx, name, 10*time.Second, b.opts...)
				if shares(a.mode, b.mode) {
					if err != nil {
						t.Fatalf("a %s beside a %s: %v, want granted", kindName(j), kindName(i), err)
					}
					if lb.Fence() <= la.Fence() {
						t.Fatalf("fences %d then %d: want one increasing sequence", la.Fence(), lb.Fence())
					}
					_ = lb.Release(ctx)
					_ = la.Release(ctx)
					return
				}
				var na *core.NotAcquiredError
				if !errors.As(err, &na) || na.RetryAfter <= 5*time.Second {
					t.Fatalf("a %s while a %s holds: %v, want NotAcquiredError with the holder's TTL", kindName(j), kindName(i), err)
				}
				if err := la.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if info, err := c.Inspect(ctx, name); err != nil || info.Held || info.Mode != "" || info.Fence != la.Fence() {
					t.Fatalf("Inspect after the release: %+v, %v (want free, last fence %d)", info, err, la.Fence())
				}
				lb, err = c.TryAcquire(ctx, name, 10*time.Second, b.opts...)
				if err != nil {
					t.Fatalf("a %s after the %s's release: %v", kindName(j), kindName(i), err)
				}
				if lb.Fence() <= la.Fence() {
					t.Fatalf("fences %d then %d: want one increasing sequence", la.Fence(), lb.Fence())
				}
				_ = lb.Release(ctx)
			})
		}
	}
}

// A waiter of one kind blocked by a hold of another is woken by that hold's release (it does not
// wait for the holder's TTL), in both directions and through the fair queues.
func TestOneLock_waiterOfAnotherKindWokenByRelease(t *testing.T) {
	srv, _, c := setup(t)
	// The waiter's client retries only every 5 to 10 s on its own: a grant within 2 s is a wake-up.
	waiters := locktest.NewClient(t, srv.Client(t), core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ctx := context.Background()
	for i, a := range kinds {
		for j, b := range kinds {
			if shares(a.mode, b.mode) {
				continue
			}
			t.Run(kindName(i)+"/"+kindName(j), func(t *testing.T) {
				name := "wake/" + kindName(i) + "-" + kindName(j)
				la, err := c.TryAcquire(ctx, name, time.Minute, a.opts...)
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 1)
				go func() {
					wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					defer cancel()
					lb, err := waiters.Acquire(wctx, name, time.Minute, b.opts...)
					if err == nil {
						err = lb.Release(ctx)
					}
					got <- err
				}()
				locktest.Eventually(t, 5*time.Second, "the waiter's flag on the name", func() bool {
					info, err := c.Inspect(ctx, name)
					return err == nil && (info.Queued+info.PermitsQueued+info.RWQueued > 0 || core.WaitersParked(waiters) > 0)
				})
				start := time.Now()
				if err := la.Release(ctx); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-got:
					if err != nil {
						t.Fatalf("the %s waiter: %v", kindName(j), err)
					}
					t.Logf("woken %v after the release", time.Since(start))
				case <-time.After(2 * time.Second):
					t.Fatalf("the %s waiter was not woken by the %s's release within 2 s", kindName(j), kindName(i))
				}
			})
		}
	}
}

// Readers whose client died (leases expired, nothing released) do not keep the name from a lock:
// the lock key's mark is only as good as the family's live leases.
func TestOneLock_expiredFamilyFreesTheName(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	r, err := c.TryAcquire(ctx, "stale", 10*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	// The reader's process is gone and its lease has run out (its watchdog would have renewed it).
	if err := rdb.ZAdd(ctx, locktest.Key("stale", "rw"), redis.Z{Score: 1, Member: r.Token()}).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := c.TryAcquire(ctx, "stale", 10*time.Second)
	if err != nil {
		t.Fatalf("a lock after the readers' leases ran out: %v", err)
	}
	if l.Fence() <= r.Fence() {
		t.Fatalf("fence %d after the reader's %d", l.Fence(), r.Fence())
	}
	if _, err := c.TryAcquire(ctx, "stale", 10*time.Second, core.Write()); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a write while the lock holds: %v", err)
	}
	_ = l.Release(ctx)
}

// ForceRelease frees a name held in any mode, and the name is then free for every kind.
func TestOneLock_forceReleaseEveryMode(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	for i, a := range kinds {
		name := "force/" + kindName(i)
		l, err := c.TryAcquire(ctx, name, time.Minute, a.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.ForceRelease(ctx, name); !ok || err != nil {
			t.Fatalf("ForceRelease of a %s: %v %v", a.mode, ok, err)
		}
		if info, err := c.Inspect(ctx, name); err != nil || info.Held || info.Fence != l.Fence() {
			t.Fatalf("after ForceRelease of a %s: %+v %v", a.mode, info, err)
		}
		for j, b := range kinds {
			lb, err := c.TryAcquire(ctx, name, time.Minute, b.opts...)
			if err != nil {
				t.Fatalf("a %s after ForceRelease of a %s: %v", kindName(j), kindName(i), err)
			}
			_ = lb.Release(ctx)
		}
	}
}

// AcquireAll takes the exclusive side of each name: a read of one of them keeps the set out.
func TestOneLock_setsTakeTheExclusiveSide(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	r, err := c.TryAcquire(ctx, "set-b", time.Minute, core.Permits(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquireAll(ctx, []string{"set-a", "set-b"}, time.Minute); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a set while a permit of one name is held: %v", err)
	}
	_ = r.Release(ctx)
	s, err := c.TryAcquireAll(ctx, []string{"set-a", "set-b"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctx, "set-a", time.Minute, core.Read()); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a read of a name the set holds: %v", err)
	}
	_ = s.Release(ctx)
}

// A hold of another kind through the context of a hold of the same name would wait for itself: it
// is refused with ErrInvalid at once; re-entries and nested holds go on.
func TestOneLock_selfExclusionRefused(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	for i, a := range kinds {
		for j, b := range kinds {
			name := "self/" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
			la, err := c.TryAcquire(ctx, name, time.Minute, a.opts...)
			if err != nil {
				t.Fatal(err)
			}
			lb, err := c.TryAcquire(la.Context(), name, time.Minute, b.opts...)
			nests := a.mode == b.mode || (a.mode == "write" && b.mode == "read")
			switch {
			case nests && err != nil && !(a.mode == "permit"):
				t.Errorf("%s inside %s: %v, want a re-entry", kindName(j), kindName(i), err)
			case !nests && a.mode == "read" && b.mode == "write":
				if !errors.Is(err, core.ErrInvalid) {
					t.Errorf("an upgrade: %v, want ErrInvalid", err)
				}
			case !nests && !errors.Is(err, core.ErrInvalid):
				t.Errorf("%s inside %s: %v, want ErrInvalid", kindName(j), kindName(i), err)
			}
			if err == nil {
				_ = lb.Release(ctx)
			}
			_ = la.Release(ctx)
		}
	}
}

// Every topology the kinds work on keeps them apart: Sentinel and Cluster.
func TestOneLock_topologies(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, c *core.Client, names []string) {
		for _, name := range names {
			w, err := c.TryAcquire(ctx, name, 10*time.Second, core.Write())
			if err != nil {
				t.Fatal(err)
			}
			for _, opts := range [][]core.AcquireOption{nil, {core.Read()}, {core.Permits(2)}} {
				if _, err := c.TryAcquire(ctx, name, 10*time.Second, opts...); !errors.Is(err, core.ErrNotAcquired) {
					t.Fatalf("%s: %v beside a write, want ErrNotAcquired", name, err)
				}
			}
			_ = w.Release(ctx)
			l, err := c.TryAcquire(ctx, name, 10*time.Second)
			if err != nil || l.Fence() <= w.Fence() {
				t.Fatalf("%s: a lock after the write: %v (fence %d after %d)", name, err, l.Fence(), w.Fence())
			}
			_ = l.Release(ctx)
		}
	}
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		var names []string
		for name := range namesOnEveryMaster(t, cl) {
			names = append(names, name)
		}
		check(t, locktest.NewClient(t, cl.Client(t)), names)
	})
	t.Run("sentinel", func(t *testing.T) {
		s := redistest.StartSentinel(t)
		check(t, locktest.NewClient(t, s.Client(t)), []string{"a", "b"})
	})
}
