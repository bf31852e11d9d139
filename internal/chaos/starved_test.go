package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// starvedTTL is the TTL the starved holder takes its lock with: the shortest its timers' lateness
// at GOMAXPROCS=1 beside 8 spinners allows (docs/guarantees.md, "Late timers").
const starvedTTL = time.Second

// starvedRefusers is how many goroutines of the starved child take holds whose renewals fail
// (refuseKeys), each on names of its own, their starts spread over a TTL: each such hold ends by
// its validity deadline, on a timer of the starved process, which is where a late timer shows.
const starvedRefusers = 4

// starvedHold is a hold of the starved child as its spinners see it.
type starvedHold struct {
	id   holdID
	ctx  context.Context
	live atomic.Int64 // the last moment (Unix ns) a spinner found ctx live (a lower bound)
}

// open reports whether ctx's Done is still open. The spinners look at Done, not Err: Err reads the
// clock and ends a hold past its validity deadline itself (core's holdCtx), while Done is closed by
// the watchdog's timer, whose lateness is what the late-timer guard covers and this scenario checks.
func open(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	default:
		return true
	}
}

// starvedChild holds "starved" holds times, each for up to 2 TTLs, while starvedRefusers
// goroutines take refused holds each on names "starved-J-I" whose renewals fail, at GOMAXPROCS=1
// (its environment) beside 8 goroutines that spin, checking the holds' contexts' Done (open). Once its Clients
// are closed it prints "hold KEY FENCE LIVE UNTIL" per hold, LIVE being the last moment (Unix ns) a
// spinner found the context live and UNTIL the latest moment its key could still be in Redis
// (keyBound).
func starvedChild(addr string, holds, refused int, out io.Writer) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	rdbRefused := redis.NewClient(&redis.Options{Addr: addr})
	defer rdbRefused.Close()
	refuse := &refuseKeys{}
	rdbRefused.AddHook(refuse)
	probe := redis.NewClient(&redis.Options{Addr: addr})
	defer probe.Close()
	kb := newKeyBound(probe)
	c, err := core.New(rdb, core.WithHook(kb.hook()))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	cr, err := core.New(rdbRefused, core.WithHook(kb.hook()))
	if err != nil {
		return err
	}
	defer cr.Close(ctx)

	var slots [1 + starvedRefusers]atomic.Pointer[starvedHold]
	var stop atomic.Bool
	defer stop.Store(true)
	for range 8 {
		go func() {
			for !stop.Load() {
				for i := range slots {
					t := time.Now().UnixNano() // (before the check: a live context was live at t or later)
					if h := slots[i].Load(); h != nil && open(h.ctx) && t > h.live.Load() {
						h.live.Store(t) // (racing spinners may store a slightly earlier t: still a lower bound)
					}
				}
			}
		}()
	}
	var mu sync.Mutex
	var done []*starvedHold
	hold := func(cl *core.Client, slot *atomic.Pointer[starvedHold], name string, refused bool) error {
		l, err := cl.Acquire(ctx, name, starvedTTL, core.WithWait(time.Minute))
		if errors.Is(err, core.ErrUnavailable) || errors.Is(err, errRefused) {
			return nil // answered later than its validity less the guard, or coalesced with a refused renewal
		} else if err != nil {
			return err
		}
		h := &starvedHold{id: holdID{l.Key(), l.Fence()}, ctx: l.Context()}
		slot.Store(h)
		kb.read(h.id)
		if refused && !refuse.add(h.id.key) {
			return errors.New("too many refused keys")
		}
		select {
		case <-h.ctx.Done():
		case <-time.After(2 * starvedTTL):
		}
		refuse.remove(h.id.key)
		_ = l.Release(ctx)
		slot.Store(nil)
		mu.Lock()
		done = append(done, h)
		mu.Unlock()
		return nil
	}
	errs := make(chan error, 1+starvedRefusers)
	go func() {
		for range holds {
			if err := hold(c, &slots[0], "starved", false); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for j := range starvedRefusers {
		go func() {
			<-time.After(time.Duration(j) * starvedTTL / starvedRefusers) // (spread: independent timers)
			for i := range refused {
				if err := hold(cr, &slots[1+j], fmt.Sprintf("starved-%d-%d", j, i), true); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 1 + starvedRefusers {
		if err := <-errs; err != nil {
			return err
		}
	}
	if err := errors.Join(c.Close(ctx), cr.Close(ctx)); err != nil {
		return err
	}
	for _, h := range done {
		fmt.Fprintf(out, "hold %s %d %d %d\n", h.id.key, h.id.fence, h.live.Load(), kb.bound(h.id))
	}
	fmt.Fprintln(out, "done")
	return nil
}

// runStarved runs a CPU-starved holder (a container at its CPU quota) while another client takes
// its lock "starved" whenever it can; beside it, the child's refusers take holds whose renewals
// fail. The promise: a hold's context ends before anyone else can be granted the name, that is
// before its key can leave Redis. So no hold's context may be found live once its key could have
// left Redis (the child's bound, keyBound), nor once the next holder was granted the lock (its
// fence is Redis's clock in µs at the grant, on this host's clock). The first check is the one that
// fails with the watchdog's late-timer guard reverted (core/watchdog_late.go): at 1 s a context
// outliving its key by a timer's lateness is far more frequent than a grant in that gap, and the
// refused holds all end by their validity deadline, where that lateness shows. Nothing in it is
// drawn at random: a run replays as it ran but for the machine's timing.
func runStarved(t *testing.T, rep *chaos.Report) {
	row := rep.Row("starved holder (GOMAXPROCS=1, 8 spinners)")
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	other := locktest.NewClient(t, rdb)
	holds, refused := pick(3, 12), pick(4, 12)
	ch := startChild(t, "starved", "LOCKKIT_CHAOS_REDIS="+srv.Addr(), "LOCKKIT_CHAOS_HOLDS="+itoa(holds),
		"LOCKKIT_CHAOS_REFUSED="+itoa(refused), "GOMAXPROCS=1")
	row.Faults(1)
	ctx, cancel := context.WithCancel(context.Background())
	var fences []int64
	took := make(chan error, 1)
	go func() {
		defer close(took)
		for ctx.Err() == nil {
			o, err := other.Acquire(ctx, "starved", starvedTTL, core.WithWait(time.Minute))
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, core.ErrUnavailable):
				continue
			case err != nil:
				took <- err
				return
			}
			fences = append(fences, o.Fence())
			if err := o.Release(context.Background()); err != nil && !errors.Is(err, core.ErrLost) {
				took <- err
				return
			}
			freed, _ := rdb.Get(ctx, "lockkit:{starved}").Result()
			for ctx.Err() == nil { // until the child takes it (the key changes): then wait for it
				if v, _ := rdb.Get(ctx, "lockkit:{starved}").Result(); v != freed {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	type hold struct {
		key                string
		fence, live, until int64
	}
	var got []hold
	for {
		l := ch.line(t, time.Minute)
		if l == "done" {
			break
		}
		var h hold
		if _, err := fmt.Sscanf(l, "hold %s %d %d %d", &h.key, &h.fence, &h.live, &h.until); err != nil {
			t.Fatalf("child: %q: %v", l, err)
		}
		got = append(got, h)
	}
	cancel()
	if err := <-took; err != nil {
		t.Fatal(err)
	}
	ch.wait(t, 10*time.Second)
	for _, h := range got {
		row.Ops(1)
		if h.key != "lockkit:{starved}" {
			row.Faults(1) // (its renewals refused)
		}
		if h.live == 0 {
			continue
		}
		margin := time.Duration(h.until - h.live)
		if h.until != math.MaxInt64 && h.live >= h.until {
			row.Violation(t, "the starved holder's context (%s, fence %d) was live %v after its key could have left Redis (its expiry, read after the hold's last successful acquisition or renewal, + 1 ms)",
				h.key, h.fence, -margin)
		}
		i, _ := slices.BinarySearch(fences, h.fence+1)
		if h.key != "lockkit:{starved}" {
			i = len(fences) // (a refused hold: no other client takes its name)
		}
		if i < len(fences) {
			next := fences[i] * 1000
			margin = min(margin, time.Duration(next-h.live))
			if h.live >= next {
				row.Violation(t, "the starved holder's context (fence %d) was live %v after the next holder (fence %d) was granted",
					h.fence, time.Duration(h.live-next), fences[i])
			}
		}
		if h.until != math.MaxInt64 || i < len(fences) {
			row.Margin(margin)
		}
	}
	row.Ops(len(fences))
}

// starvedHolds returns the number the parent set in the environment variable env.
func starvedHolds(env string) int {
	var n int
	_, _ = fmt.Sscan(os.Getenv(env), &n)
	return n
}
