package core

import (
	"context"
	"sync"
	"time"
)

// The Redlock fan-out: one request per node in parallel, bounded by the per-node timeout, and
// returning early once enough nodes have settled the outcome.

// settle returns copies of per-node results in which nodes that did not answer in time count as
// failed. (Their goroutines may still write the originals.)
func settle[T any](answered []bool, vals []T, errs []error) ([]T, []error) {
	v := make([]T, len(vals))
	e := make([]error, len(errs))
	for i := range answered {
		if answered[i] {
			v[i], e[i] = vals[i], errs[i]
		} else {
			e[i] = errNodeTimeout
		}
	}
	return v, e
}

// nodeTimeout is how long one node may take to answer: WithNodeTimeout, or TTL/20 (at least 10 ms).
func (rl *redlock) nodeTimeout(ttl time.Duration) time.Duration {
	if rl.timeout > 0 {
		return rl.timeout
	}
	return max(ttl/20, 10*time.Millisecond)
}

// fan runs fn on every node in parallel, each with the per-node timeout, and returns which nodes
// answered within it. It does not wait longer even if a go-redis client ignores context deadlines
// on its sockets (ContextTimeoutEnabled false): fn's result for a node that answers later is not
// counted, and late(i), if not nil, runs after it instead (e.g. to undo a late acquisition).
//
// With need > 0 it also stops waiting once need calls of fn returned true (a quorum that settles
// the outcome), so that the slowest node does not set the latency. The other calls go on in the
// background, to their end or the per-node timeout, and count as late.
func (rl *redlock) fan(ctx context.Context, ttl time.Duration, need int, fn func(ctx context.Context, i int, n *node) bool, late func(i int)) []bool {
	return rl.fanFor(ctx, rl.nodeTimeout(ttl), need, fn, late)
}

func (rl *redlock) fanFor(ctx context.Context, t time.Duration, need int, fn func(ctx context.Context, i int, n *node) bool, late func(i int)) []bool {
	var (
		mu       sync.Mutex
		answered = make([]bool, len(rl.nodes))
		left     = len(rl.nodes)
		good     int
		gaveUp   bool
		enough   = make(chan struct{})
	)
	if need <= 0 || need > left {
		need = left + 1 // never reached: wait for every node
	}
	// One deadline for every node: go-redis honours it on sockets with ContextTimeoutEnabled; the
	// wait below honours it regardless. It is cancelled when the wait times out (stragglers are
	// abandoned: their requests may as well stop), or else by the last node to answer.
	nctx, cancel := context.WithTimeout(ctx, t)
	timedOut := false
	defer func() {
		if timedOut {
			cancel()
		}
	}()
	for i, n := range rl.nodes {
		go func() {
			ok := fn(nctx, i, n)
			mu.Lock()
			tooLate := gaveUp
			if !tooLate {
				answered[i] = true
				if ok {
					good++
				}
			}
			left--
			if (!tooLate && good == need) || left == 0 {
				select {
				case <-enough:
				default:
					close(enough)
				}
			}
			if left == 0 {
				cancel()
			}
			mu.Unlock()
			if tooLate && late != nil {
				late(i)
			}
		}()
	}
	select {
	case <-enough:
	case <-nctx.Done():
		timedOut = true
	}
	mu.Lock()
	gaveUp = true
	out := append([]bool(nil), answered...)
	mu.Unlock()
	return out
}

// stragglers decides what happens to grants that arrive after an acquisition stopped waiting for
// them: kept when the acquisition succeeded (the lock then lives on more nodes than the quorum,
// which is what lets it survive the loss of a node; kept(i) makes such a node agree with the
// acquisition's fence), given back when it failed.
type stragglers struct {
	mu      sync.Mutex
	decided bool
	keep    bool
	pending []int
	undo    func(i int)
	kept    func(i int) // nil: nothing to do
	fenceTo func(fence int64) func(i int)
}

func (s *stragglers) late(i int) {
	s.mu.Lock()
	if !s.decided {
		s.pending = append(s.pending, i)
		s.mu.Unlock()
		return
	}
	keep, kept := s.keep, s.kept
	s.mu.Unlock()
	if !keep {
		s.undo(i)
	} else if kept != nil {
		kept(i)
	}
}

func (s *stragglers) decide(keep bool, kept func(i int)) {
	s.mu.Lock()
	s.decided, s.keep, s.kept = true, keep, kept
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, i := range pending {
		// Bounded by the node timeout; the acquisition need not wait.
		if !keep {
			go s.undo(i)
		} else if kept != nil {
			go kept(i)
		}
	}
}
