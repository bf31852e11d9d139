package chaos_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/chaos"
)

// sections records critical sections, as their holders saw them, to check that no two overlapped.
// A section starts when Acquire returned and ends when the holder released the lock or, if it was
// lost, when the Lost hook ran (right after the lock's context was cancelled, and before the hold
// was given back: no other client can have been granted the name through it by then).
type sections struct {
	mu   sync.Mutex
	all  []section
	lost map[string]time.Time // name/fence -> when it was reported lost
	errs map[string]int       // errors of Do other than a lost lock, by type
	last map[string]string    // the last error of each type
}

type section struct {
	name       string
	fence      int64
	start, end time.Time
	lost       bool
}

func newSections() *sections {
	return &sections{lost: map[string]time.Time{}, errs: map[string]int{}, last: map[string]string{}}
}

func lostKey(name string, fence int64) string { return name + "/" + itoa(int(fence)) }

func (s *sections) hook() core.Hook {
	return core.Hook{Lost: func(_ context.Context, info core.HoldInfo) {
		s.mu.Lock()
		s.lost[lostKey(info.Lock.Name(), info.Lock.Fence())] = time.Now()
		s.mu.Unlock()
	}}
}

// do runs one critical section with c.Do: it works for up to maxWork, or until the lock is lost.
func (s *sections) do(ctx context.Context, c *core.Client, name string, ttl, maxWork time.Duration) error {
	var sec section
	err := c.Do(ctx, name, ttl, func(ctx context.Context) error {
		l, _ := core.FromContext(ctx)
		sec = section{name: name, fence: l.Fence(), start: time.Now()}
		select {
		case <-time.After(rand.N(maxWork)):
		case <-ctx.Done():
		}
		sec.end = time.Now()
		return nil
	}, core.WithWait(3*ttl))
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec.fence != 0 {
		if at, ok := s.lost[lostKey(name, sec.fence)]; ok {
			sec.end, sec.lost = at, true
		}
		s.all = append(s.all, sec)
	}
	if err != nil && !errors.Is(err, core.ErrLost) {
		s.errs[typeOf(err)]++
		s.last[typeOf(err)] = err.Error()
	}
	return err
}

func typeOf(err error) string {
	var e interface{ ErrorType() string }
	if errors.As(err, &e) {
		return e.ErrorType()
	}
	return "other"
}

// settle lets the workers go on, with no fault, until at least want sections have ended or d
// passes: on a loaded host the faults of a few rounds can leave fewer (CI: 6 sections in 4 Redlock
// rounds, two of them with a majority down), and a run's minimum must measure whether the
// workload runs once the faults end, not how fast the host was during them.
func (s *sections) settle(want int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n := len(s.all)
		s.mu.Unlock()
		if n >= want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check counts the sections and reports overlaps and fences that do not follow the sections' order.
func (s *sections) check(t *testing.T, row *chaos.Row) (n, lost int) {
	s.mu.Lock()
	all := slices.Clone(s.all)
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b section) int { return a.start.Compare(b.start) })
	last := map[string]section{}
	for _, x := range all {
		if x.lost {
			lost++
		}
		if p, ok := last[x.name]; ok {
			if x.start.Before(p.end) {
				row.Violation(t, "%s: section with fence %d started %v before the one with fence %d ended (lost %v)",
					x.name, x.fence, p.end.Sub(x.start), p.fence, p.lost)
			}
			if x.fence <= p.fence {
				row.Violation(t, "%s: fence %d after %d", x.name, x.fence, p.fence)
			}
			if p.lost {
				row.Margin(x.start.Sub(p.end))
			}
		}
		last[x.name] = x
	}
	row.Ops(len(all))
	return len(all), lost
}

// lostSince returns the detection latencies of the losses reported after fault: how long after it
// each lock held then was reported lost.
func (s *sections) lostSince(fault time.Time, until time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ds []time.Duration
	for _, at := range s.lost {
		if at.After(fault) && at.Before(until) {
			ds = append(ds, at.Sub(fault))
		}
	}
	return ds
}

// workers runs n goroutines per client doing critical sections on names until stop is closed.
func (s *sections) workers(clients []*core.Client, n int, names []string, ttl, maxWork time.Duration, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, c := range clients {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := s.do(context.Background(), c, names[rand.N(len(names))], ttl, maxWork); errors.Is(err, core.ErrUnavailable) {
						time.Sleep(20 * time.Millisecond) // back off while Redis is unreachable
					}
				}
			}()
		}
	}
	return &wg
}
