package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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

// starvedChild holds "starved" holds times, each for up to 2 TTLs, at GOMAXPROCS=1 (its
// environment) beside 8 goroutines that spin, checking the hold's context: it prints
// "hold FENCE LIVE" per hold, LIVE being the last moment (Unix ns) one found the context live.
func starvedChild(addr string, holds int, out io.Writer) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c, err := core.New(rdb)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	type hold struct {
		ctx  context.Context
		live atomic.Int64
	}
	var cur atomic.Pointer[hold]
	var stop atomic.Bool
	defer stop.Store(true)
	for range 8 {
		go func() {
			for !stop.Load() {
				t := time.Now().UnixNano() // (before the check: a live context was live at t or later)
				if h := cur.Load(); h != nil && h.ctx.Err() == nil && t > h.live.Load() {
					h.live.Store(t) // (racing spinners may store a slightly earlier t: still a lower bound)
				}
			}
		}()
	}
	for range holds {
		l, err := c.Acquire(ctx, "starved", starvedTTL, core.WithWait(time.Minute))
		if errors.Is(err, core.ErrUnavailable) {
			continue // answered later than its validity less the guard: given back
		} else if err != nil {
			return err
		}
		h := &hold{ctx: l.Context()}
		cur.Store(h)
		select {
		case <-h.ctx.Done():
		case <-time.After(2 * starvedTTL):
		}
		_ = l.Release(ctx)
		cur.Store(nil)
		fmt.Fprintf(out, "hold %d %d\n", l.Fence(), h.live.Load())
	}
	fmt.Fprintln(out, "done")
	return nil
}

// runStarved runs a CPU-starved holder (a container at its CPU quota) while another client takes
// the lock whenever it can: no hold's context may be found live once the next holder was granted
// the lock (its fence is Redis's clock in µs at the grant, on this host's clock).
func runStarved(t *testing.T, rep *chaos.Report) {
	row := rep.Row("starved holder (GOMAXPROCS=1, 8 spinners)")
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	other := locktest.NewClient(t, rdb)
	holds := pick(3, 12)
	ch := startChild(t, "starved", "LOCKKIT_CHAOS_REDIS="+srv.Addr(), "LOCKKIT_CHAOS_HOLDS="+itoa(holds), "GOMAXPROCS=1")
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
	type hold struct{ fence, live int64 }
	var got []hold
	for {
		l := ch.line(t, time.Minute)
		if l == "done" {
			break
		}
		var h hold
		if _, err := fmt.Sscanf(l, "hold %d %d", &h.fence, &h.live); err != nil {
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
		i, _ := slices.BinarySearch(fences, h.fence+1)
		if i == len(fences) || h.live == 0 {
			continue
		}
		next := fences[i] * 1000
		row.Margin(time.Duration(next - h.live))
		if h.live >= next {
			row.Violation(t, "the starved holder's context (fence %d) was live %v after the next holder (fence %d) was granted",
				h.fence, time.Duration(h.live-next), fences[i])
		}
	}
	row.Ops(len(fences))
}

func starvedHolds() int {
	var n int
	_, _ = fmt.Sscan(os.Getenv("LOCKKIT_CHAOS_HOLDS"), &n)
	return n
}
