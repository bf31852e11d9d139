package core_test

import (
	"context"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkPermitAcquireRelease is an uncontended permit: acquire + release. Reports the Redis
// round trips per op (2: one EVALSHA each).
func BenchmarkPermitAcquireRelease(b *testing.B) {
	srv := redistest.Start(b)
	c := locktest.NewClient(b, srv.Client(b))
	ctx := context.Background()
	p, err := c.Acquire(ctx, "sem", time.Second, core.Permits(4)) // load the scripts
	if err != nil {
		b.Fatal(err)
	}
	_ = p.Release(ctx)
	srv.ResetStats(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p, err := c.Acquire(ctx, "sem", time.Second, core.Permits(4))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st := srv.CommandStats(b)
	b.ReportMetric(float64(st["evalsha"]+st["eval"])/float64(b.N), "roundtrips/op")
}

// BenchmarkPermitsContended: 16 workers (8 in each of 2 Clients) on 4 permits, each holding a
// permit for 1ms (a sleep: 4 holders spinning would starve Redis on a small machine). The ideal is
// 4 000 permits/s. Reports permits/s, its share of the ideal (%ideal), of the ideal for the hold
// actually slept (%ideal-slept: a sleep lasts longer than asked) and of the floor (%floor: 4 workers
// on 4 permits, nobody waits — what the machine's round trips and timers allow), wait percentiles,
// Redis commands per acquisition (top-level, INFO commandstats) and the handoff (from a release to
// the acquisition of a waiter it let in).
//
// The hold is time.Sleep (sleep=go), or a timerfd read (sleep=timerfd). time.Sleep wakes up late
// in a process whose threads wait in epoll: the runtime's timed waits have a millisecond
// granularity, so a 1ms sleep lasts 1.1–1.5ms here, more with more goroutines sleeping. A timerfd
// is a file the runtime's poller watches, ready when the kernel's timer fires: a hold of 1.05–1.1ms,
// with no thread blocked and no CPU spent, closer to what "1ms" means.
func BenchmarkPermitsContended(b *testing.B) {
	srv := redistest.Start(b)
	for _, sleep := range []string{"go", "timerfd"} {
		var floor float64
		for _, tc := range []struct {
			name   string
			perCli int
			fair   bool
		}{
			{"g=4/permits=4/hold=1ms/floor", 2, false},
			{"g=16/permits=4/hold=1ms", 8, false},
			{"g=16/permits=4/hold=1ms/fair", 8, true},
		} {
			b.Run("sleep="+sleep+"/"+tc.name, func(b *testing.B) {
				var clients []*core.Client
				for range 2 {
					rdb := redis.NewClient(poolOpts(srv, 10))
					b.Cleanup(func() { rdb.Close() })
					clients = append(clients, locktest.NewClient(b, rdb))
				}
				opts := []core.AcquireOption{core.Permits(4)}
				if tc.fair {
					opts = append(opts, core.Fair())
				}
				rate := runPermits(b, srv, clients, tc.perCli, sleep == "timerfd", opts)
				if tc.perCli == 2 {
					floor = rate
				} else if floor > 0 {
					b.ReportMetric(100*rate/floor, "%floor")
				}
			})
		}
	}
}

// holdTimer holds for a duration by reading a timerfd (Linux; see BenchmarkPermitsContended).
type holdTimer struct{ f *os.File }

func newHoldTimer(b *testing.B) holdTimer {
	const clockMonotonic = 1
	fd, _, e := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		b.Fatal(e)
	}
	return holdTimer{os.NewFile(fd, "timerfd")}
}

func (h holdTimer) sleep(d time.Duration) error {
	spec := [2]syscall.Timespec{{}, syscall.NsecToTimespec(int64(d))} // interval, value
	rc, err := h.f.SyscallConn()
	if err != nil {
		return err
	}
	var e syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, e = syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	}); err != nil {
		return err
	}
	if e != 0 {
		return e
	}
	var buf [8]byte
	_, err = h.f.Read(buf[:])
	return err
}

func runPermits(b *testing.B, srv *redistest.Server, clients []*core.Client, perCli int, timerfd bool, opts []core.AcquireOption) float64 {
	ctx := context.Background()
	var (
		done               atomic.Int64
		mu                 sync.Mutex
		waits, holds, rels []time.Duration
		acquired, released []time.Time
		wg                 sync.WaitGroup
		errs               = make(chan error, 64)
	)
	srv.ResetStats(b)
	b.ResetTimer()
	start := time.Now()
	for _, c := range clients {
		for range perCli {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hold := func() error { time.Sleep(time.Millisecond); return nil }
				if timerfd {
					t := newHoldTimer(b)
					defer t.f.Close()
					hold = func() error { return t.sleep(time.Millisecond) }
				}
				for done.Add(1) <= int64(b.N) {
					t0 := time.Now()
					p, err := c.Acquire(ctx, "sem-hot", time.Second, opts...)
					if err != nil {
						errs <- err
						return
					}
					t1 := time.Now()
					if err := hold(); err != nil {
						errs <- err
						return
					}
					th := time.Now()
					if err := p.Release(ctx); err != nil {
						errs <- err
						return
					}
					t2 := time.Now()
					mu.Lock()
					waits, acquired, released = append(waits, t1.Sub(t0)), append(acquired, t1), append(released, t2)
					holds, rels = append(holds, th.Sub(t1)), append(rels, t2.Sub(th))
					mu.Unlock()
				}
			}()
		}
	}
	elapsed, _, top := finishRun(b, srv, &wg, start, errs)
	// Handoff: for an acquisition that waited, from the latest release before it to it.
	slices.SortFunc(released, func(x, y time.Time) int { return x.Compare(y) })
	var handoffs []time.Duration
	for i, at := range acquired {
		if waits[i] < 200*time.Microsecond {
			continue // did not wait
		}
		j := sort.Search(len(released), func(k int) bool { return released[k].After(at) })
		if j > 0 {
			handoffs = append(handoffs, at.Sub(released[j-1]))
		}
	}
	n := float64(b.N)
	rate := n / elapsed.Seconds()
	b.ReportMetric(rate, "permits/s")
	b.ReportMetric(100*rate/4000, "%ideal") // 4 permits, 1ms each
	b.ReportMetric(float64(top)/n, "cmds/acq")
	b.ReportMetric(ms(pct(waits, 50)), "wait-p50-ms")
	b.ReportMetric(ms(pct(waits, 99)), "wait-p99-ms")
	b.ReportMetric(float64(pct(handoffs, 50).Microseconds()), "handoff-p50-µs")
	// The hold is a time.Sleep, which oversleeps: the ideal for the hold actually slept.
	held := mean(holds)
	b.ReportMetric(ms(held), "hold-ms")
	b.ReportMetric(100*rate*held.Seconds()/4, "%ideal-slept")
	b.ReportMetric(float64(mean(rels).Microseconds()), "release-µs")
	b.ReportMetric(float64(pct(rels, 50).Microseconds()), "release-p50-µs")
	return rate
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t / time.Duration(len(ds))
}
