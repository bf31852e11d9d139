package chaos_test

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The safety checker's fault injector and Redis watchers. Faults come in storms (one after another
// on random paths) separated by calm periods, so that long holds also see healthy stretches. Each
// fault is bounded in time: reply delay (latency on the replies, with jitter that reorders them
// across connections), reply loss (requests run, answers vanish, the connection closes soon after,
// so go-redis replays the command), connection resets, and a paused redis-server (SIGSTOP).

// faultRig is what the injector can break.
type faultRig struct {
	h    *history
	rnd  *rand.Rand
	srvs []*redistest.Server
	pxs  [][]*chaos.Proxy // per client slot, per node
	skip map[string]bool  // fault kinds left out (LOCKKIT_SAFETY_SKIP)
	// For key losses (safety_loss_test.go): direct connections to every node, the names in play,
	// whether they are semaphores or held in every kind (mixed: see mixedDel), and the gate (see
	// workload.gate).
	admins  []*redis.Client
	names   []string
	permits bool
	mixed   bool
	gate    *sync.RWMutex
}

// faultKinds are the kinds a storm draws from, with their weights: reply delays (3), losses (2),
// resets and pauses (1), then key losses (safety_loss_test.go, when the rig injects them): DEL,
// FLUSHALL and a restart without persistence (1 each; no restart over Redlock). Without key losses
// the draws are what they were before issue 27, so the failover and election variants' seeds
// replay as they did.
var faultKinds = [...]struct {
	kind   string
	weight int
}{{"latency", 3}, {"replyloss", 2}, {"reset", 1}, {"pause", 1}, {"del", 1}, {"flushall", 1}, {"restart", 1}, {"evict", 1}}

// inject runs storms and calm periods on the calling (test) goroutine until end.
func (f *faultRig) inject(t *testing.T, end time.Time) {
	for {
		calm := randIn(f.rnd, time.Second, 3*time.Second)
		if time.Now().Add(calm).After(end) {
			return
		}
		f.calm(t, calm) // no fault on the paths: the calm period
		storm := time.Now().Add(randIn(f.rnd, 2*time.Second, 4*time.Second))
		for time.Now().Before(storm) && time.Now().Before(end) {
			f.one(t)
			time.Sleep(randIn(f.rnd, 0, 300*time.Millisecond))
		}
	}
}

// one injects one fault on a random path and heals it when it has lasted its time.
func (f *faultRig) one(t *testing.T) {
	slot, node := f.rnd.IntN(len(f.pxs)), f.rnd.IntN(len(f.srvs))
	if held := f.h.holding(300 * time.Millisecond); len(held) > 0 && f.rnd.IntN(2) == 0 {
		slot = held[f.rnd.IntN(len(held))] // a client that holds a lock: its renewals are in play
	}
	px := f.pxs[slot][node]
	s := span{Target: slot}
	if len(f.srvs) > 1 {
		s.Detail = "node " + itoa(node)
	}
	var kinds []string
	for _, k := range faultKinds {
		if !f.skip[k.kind] && !(lossKinds[k.kind] && !f.losesKeys()) && !(k.kind == "restart" && len(f.srvs) > 1) &&
			!(k.kind == "evict" && !f.mixed) {
			for range k.weight {
				kinds = append(kinds, k.kind)
			}
		}
	}
	if len(kinds) == 0 {
		return
	}
	kind := kinds[f.rnd.IntN(len(kinds))]
	if lossKinds[kind] {
		f.lose(t, kind)
		time.Sleep(randIn(f.rnd, 100*time.Millisecond, 600*time.Millisecond)) // its consequences play out
		return
	}
	if kind != "pause" && !f.h.claim(slot, kind) {
		return // the path carries a fault a worker provoked
	}
	var d time.Duration
	var err error
	s.From = f.h.now()
	switch kind {
	case "latency":
		lat := randIn(f.rnd, 20*time.Millisecond, 300*time.Millisecond).Round(time.Millisecond)
		s.Kind, s.Detail = "latency", strings.TrimSpace(s.Detail+" "+lat.String())
		d = randIn(f.rnd, 500*time.Millisecond, 2*time.Second)
		err = px.Latency(lat, lat/2)
	case "replyloss":
		s.Kind = "replyloss"
		d = randIn(f.rnd, 20*time.Millisecond, 200*time.Millisecond)
		err = px.ReplyLoss(randIn(f.rnd, 0, 30*time.Millisecond))
	case "reset":
		s.Kind = "reset"
		d = randIn(f.rnd, 50*time.Millisecond, 500*time.Millisecond)
		err = px.Reset()
	default:
		s.Kind, s.Target, s.Detail = "pause", -1-node, ""
		d = randIn(f.rnd, 50*time.Millisecond, 400*time.Millisecond)
		f.srvs[node].Pause(t)
	}
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d) // the fault lasts d
	if s.Kind == "pause" {
		f.srvs[node].Resume(t)
	} else {
		px.Clear()
		f.h.claim(slot, "")
	}
	s.To = f.h.now()
	f.h.addFault(s)
}

// randIn returns a random duration in [lo, hi) from rnd.
func randIn(rnd *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rnd.Int64N(int64(hi-lo)))
}

// watch samples the probe's timer lateness every 100 ms, and every 200 ms looks at Redis directly
// (not through a proxy): every key under the prefix must have a TTL, and a failed acquisition's
// token must not own its lock orphanAge after the failure. It returns when stop is closed, after a
// last look.
func watch(h *history, admins []*redis.Client, stop <-chan struct{}) {
	p := runProbe()
	defer p.close()
	sl := newSchedLatency()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := h.now()
	for i := 0; ; i++ {
		select {
		case <-stop:
			look(h, admins, 0)
			return
		case <-tick.C:
		}
		now := h.now()
		h.addLate(last, now, p.take())
		h.addSched(last, now, sl.take())
		last = now
		if i%2 == 0 {
			look(h, admins, orphanAge)
		}
	}
}

// schedLatency reads the Go scheduler's own record of how long goroutines waited, runnable, before
// they ran (runtime/metrics /sched/latencies:seconds). The probe's sleeping goroutine alone
// underestimates it on a busy machine: a goroutine a timer readies takes the next-to-run slot and
// pushes the one there to the back of the run queue, so the probe may see 1 ms while the watchdog's
// goroutine waits 50 (seen: renewals of a 50 ms lock not sent for 70 ms, with the probe at 1.2 ms).
// The runtime samples one goroutine wake-up in eight: the worst sampled wait over 100 ms. The
// oracle uses it where its premise is a prompt watchdog (see oracle.schedSlack).
type schedLatency struct {
	s    []metrics.Sample
	prev []uint64
}

func newSchedLatency() *schedLatency {
	l := &schedLatency{s: []metrics.Sample{{Name: "/sched/latencies:seconds"}}}
	l.take()
	return l
}

// take returns the upper bound of the highest bucket that gained a wait since the last take.
func (l *schedLatency) take() time.Duration {
	metrics.Read(l.s)
	if l.s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	hist := l.s[0].Value.Float64Histogram()
	var worst float64
	for i, n := range hist.Counts {
		if i < len(l.prev) && n > l.prev[i] {
			worst = hist.Buckets[i+1]
			if math.IsInf(worst, 1) {
				worst = 2 * hist.Buckets[i]
			}
		}
	}
	l.prev = append(l.prev[:0], hist.Counts...)
	return time.Duration(worst * float64(time.Second))
}

// orphanAge is how long after a failed acquisition its token must be gone from Redis: longer than
// the slowest reply a latency fault causes (300 ms + 50% jitter).
const orphanAge = 700 * time.Millisecond

// look scans every node for keys without a TTL and checks the failed acquisitions (of a lock or a
// permit) at least age old.
func look(h *history, admins []*redis.Client, age time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, rdb := range admins {
		iter := rdb.Scan(ctx, 0, "lockkit:*", 100).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			if d, err := rdb.PTTL(ctx, key).Result(); err == nil && d == -1 {
				h.mu.Lock()
				if _, ok := h.noTTL[key]; !ok {
					h.noTTL[key] = h.now()
				}
				h.mu.Unlock()
			}
		}
	}
	h.mu.Lock()
	var todo []*failed
	for _, f := range h.fails {
		if f.Checked == 0 && h.now()-f.Ret >= age {
			todo = append(todo, f)
		}
	}
	h.mu.Unlock()
	for _, f := range todo {
		seen := 0
		for _, rdb := range admins {
			if f.Limit > 0 { // a permit
				if permitHeld(ctx, rdb, f.Name, f.Tok) {
					seen++
				}
			} else if v, err := rdb.Get(ctx, locktest.Key(f.Name)).Result(); err == nil && ownedBy(v, f.Tok) {
				seen++
			}
		}
		at := h.now()
		h.mu.Lock()
		f.Checked, f.Seen = at, seen
		h.mu.Unlock()
	}
}
