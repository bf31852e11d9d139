package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Key losses (issue #27): an operator's Client.ForceRelease, and keys lost behind lockkit's back —
// DEL of a lock's key or of a semaphore's keys, FLUSHALL, a restart of the redis-server without
// persistence. docs/guarantees.md: the holder hears of it at its next renewal (not_owner) and can be
// working under the lock until then, while somebody else already holds it; fences keep
// increasing; re-entry keeps the fence. The oracle bounds that window (see oracle.lossBound).
//
// Over Redlock a loss hits every node (ForceRelease does; DEL and FLUSHALL are sent to each node):
// a minority's loss is tolerated by the quorum, and a restart without persistence is a documented
// non-guarantee there ("Redlock and restarts"), so it is not injected.

// lossKinds are the fault kinds that delete keys.
var lossKinds = map[string]bool{"force": true, "del": true, "flushall": true, "restart": true, "evict": true}

// heldNames returns the names among names that a hold not yet seen ended holds now.
func (h *history) heldNames(names []string) []string {
	h.mu.Lock()
	calls := slices.Clone(h.calls)
	h.mu.Unlock()
	var out []string
	for _, c := range calls {
		c.mu.Lock()
		n, open := c.hold.Name, c.hold.End == 0
		c.mu.Unlock()
		if open && slices.Contains(names, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// liveToken returns the token of a hold of name not yet seen ended, if any (the last one).
func (h *history) liveToken(name string) string {
	h.mu.Lock()
	calls := slices.Clone(h.calls)
	h.mu.Unlock()
	tok := ""
	for _, c := range calls {
		c.mu.Lock()
		if c.hold.Name == name && c.hold.End == 0 {
			tok = c.hold.Tok
		}
		c.mu.Unlock()
	}
	return tok
}

// lostSince reports whether a key loss of the lock name (or of every name) ended at or after since.
func (h *history) lostSince(name string, since time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.faults {
		if lossKinds[f.Kind] && (f.Name == "" || f.Name == name) && (f.Keys == "" || f.Keys == "lock") && f.To >= since {
			return true
		}
	}
	return false
}

// operator is the person who runs `lockkit release --force`: at random moments it force-releases
// a name, mostly one that is held now, sometimes right when a holder's renewal is in flight, so
// that the release races re-entries, renewals and releases. It has its own Client, connected to
// Redis directly (faults on the workers' paths do not touch it).
type operator struct {
	h     *history
	rnd   *rand.Rand
	c     *core.Client
	names []string
	gate  *sync.RWMutex // see workload.gate
	stop  <-chan struct{}
}

// newOperator returns an operator whose Client reaches every node directly (NewRedlock over
// several); its connections are closed when the test ends.
func newOperator(t *testing.T, h *history, seed uint64, srvs []*redistest.Server, names []string, gate *sync.RWMutex, stop <-chan struct{}) *operator {
	var rdbs []redis.UniversalClient
	for _, s := range srvs {
		o := s.Options()
		o.ReadTimeout, o.WriteTimeout, o.DialTimeout = time.Second, time.Second, time.Second
		rdb := redis.NewClient(o)
		t.Cleanup(func() { _ = rdb.Close() })
		rdbs = append(rdbs, rdb)
	}
	var c *core.Client
	var err error
	if len(rdbs) == 1 {
		c, err = core.New(rdbs[0])
	} else {
		c, err = core.NewRedlock(rdbs)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return &operator{h: h, rnd: rand.New(rand.NewPCG(seed, 1<<41)), c: c, names: names, gate: gate, stop: stop}
}

// run force-releases names until stop is closed, every 0.2 to 1.2 s.
func (op *operator) run() {
	for {
		t := time.NewTimer(randIn(op.rnd, 200*time.Millisecond, 1200*time.Millisecond))
		select {
		case <-op.stop:
			t.Stop()
			return
		case <-t.C:
		}
		name := op.names[op.rnd.IntN(len(op.names))]
		if held := op.h.heldNames(op.names); len(held) > 0 && op.rnd.IntN(3) != 0 {
			name = held[op.rnd.IntN(len(held))]
		}
		if op.rnd.IntN(3) == 0 { // race a renewal in flight
			if tok := op.h.liveToken(name); tok != "" {
				for wait := time.Now().Add(time.Second); time.Now().Before(wait) && !op.h.inFlight(tok); {
					time.Sleep(time.Millisecond) // a race, not a synchronisation
				}
			}
		}
		op.force(name)
	}
}

func (op *operator) force(name string) {
	if op.gate != nil {
		op.gate.Lock()
		defer op.gate.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s := span{Kind: "force", Target: -1, Name: name, From: op.h.now()}
	ok, err := op.c.ForceRelease(ctx, name)
	s.To = op.h.now()
	s.Unsure = err != nil
	s.Detail = fmt.Sprintf("deleted=%v", ok)
	if err != nil {
		s.Detail = "error: " + err.Error()
	}
	op.h.addFault(s)
	op.h.count("force")
	if ok {
		op.h.count("force-deleted")
	}
}

// calm lets d pass without a fault on any path, but with key losses at random moments (every 0.3
// to 1.5 s: DEL 4, FLUSHALL 1, restart 1 in 6): a loss on a healthy path must be heard of within
// one renewal interval (see oracle.lossBound).
func (f *faultRig) calm(t *testing.T, d time.Duration) {
	end := time.Now().Add(d)
	var kinds []string
	for k, w := range map[string]int{"del": 4, "flushall": 1, "restart": 1, "evict": 1} {
		if !f.skip[k] && f.losesKeys() && !(k == "restart" && len(f.srvs) > 1) && !(k == "evict" && !f.mixed) {
			for range w {
				kinds = append(kinds, k)
			}
		}
	}
	slices.Sort(kinds) // (map order is random; the seed fixes the draws)
	if len(kinds) == 0 {
		time.Sleep(d) // (no draw: the schedule is what it was without key losses)
		return
	}
	for {
		next := randIn(f.rnd, 300*time.Millisecond, 1500*time.Millisecond)
		if time.Now().Add(next).After(end) {
			time.Sleep(time.Until(end))
			return
		}
		time.Sleep(next)
		f.lose(t, kinds[f.rnd.IntN(len(kinds))])
	}
}

// losesKeys reports whether the rig injects key losses: only when it knows the names in play and
// has direct connections to the nodes (runSafety's variants), and LOCKKIT_SAFETY_SKIP does not
// leave them out. (A rig without them, as the failover and election variants make, injects the
// path faults only.)
func (f *faultRig) losesKeys() bool {
	return len(f.names) > 0 && len(f.admins) == len(f.srvs) && !f.skip["keyloss"]
}

// lose injects the key loss kind (del, flushall, restart) on the test goroutine.
func (f *faultRig) lose(t *testing.T, kind string) {
	if f.gate != nil {
		f.gate.Lock()
		defer f.gate.Unlock()
	}
	if kind == "evict" { // (the mixed variant's one node: safety_evict_test.go)
		f.evict(t, f.admins[0])
		return
	}
	s := span{Kind: kind, Target: -1}
	if len(f.srvs) > 1 {
		s.Detail = "all nodes"
	}
	var cmd []any
	switch kind {
	case "del":
		s.Name = f.names[f.rnd.IntN(len(f.names))]
		if held := f.h.heldNames(f.names); len(held) > 0 && f.rnd.IntN(4) != 0 {
			s.Name = held[f.rnd.IntN(len(held))]
		}
		key := locktest.Key(s.Name)
		s.Keys, cmd = "lock", []any{"DEL", key}
		if f.permits {
			s.Keys, cmd = "permits", []any{"DEL", key + ":permits", key + ":permits:limits", key + ":permits:fences"}
			if f.rnd.IntN(3) == 0 {
				s.Keys, cmd = "fence", []any{"DEL", key} // the name's lock key: the family's mark and the name's fence
			}
		}
		if f.mixed {
			s.Keys, cmd = mixedDel(f.rnd, key)
		}
	case "flushall":
		cmd = []any{"FLUSHALL"}
	}
	s.From = f.h.now()
	if kind == "restart" {
		f.srvs[0].Restart(t)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		for _, rdb := range f.admins {
			if err := rdb.Do(ctx, cmd...).Err(); err != nil {
				s.Unsure = true
				s.Detail += " error: " + err.Error()
			}
		}
		cancel()
	}
	s.To = f.h.now()
	f.h.addFault(s)
}
