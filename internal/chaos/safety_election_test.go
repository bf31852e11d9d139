package chaos_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The election variant of the safety checker (TestChaosSafety/election): campaigners on three
// clients (each over its own chaos proxy) Campaign on one election with short TTLs, lead for a
// short or a long while, and Resign, or lose leadership to the faults (reply delay and loss,
// resets, a paused redis-server) or to their client's Close. Observers Observe the election
// throughout: four 1, 2, 5 and 10 ms from Redis (a DelayProxy nothing else touches), one through
// a chaos proxy the faults hit too, and one direct. Every term is a hold of the election's lock, so the lock
// oracle checks "at most one live leader" and "fences increase in acquisition order"; the
// observers' reports are checked by checkObserve.

// electionTTLs are the terms' TTLs: short, so that many terms begin and end.
var electionTTLs = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond,
	500 * time.Millisecond, time.Second}

// electionName is the election every campaigner and observer uses.
const electionName = "e0"

// observerNames names the observers, by index: four a few ms from Redis (DelayProxy, nothing
// else touches their path), one through a chaos proxy the faults hit, and one direct.
var observerNames = []string{"1ms", "2ms", "5ms", "10ms", "faulted", "direct"}

// observerDelays are the reply delays of the first observers' paths.
var observerDelays = []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond}

// campaign is one Campaign call: its value (unique), and the hold of its term if it won.
type campaign struct {
	Value    string        `json:"value"`
	Call     time.Duration `json:"call"`
	Hold     int           `json:"hold,omitempty"` // the term's hold ID (0: Campaign failed)
	Resigned time.Duration `json:"resigned,omitempty"`
	hd       *hold
}

// observerReport is one Leader an observer received.
type observerReport struct {
	Observer int           `json:"observer"`
	At       time.Duration `json:"at"`
	Fence    int64         `json:"fence"`
	Value    string        `json:"value"`
}

// electionLog is what the campaigners and observers record beside the history.
type electionLog struct {
	mu        sync.Mutex
	campaigns []*campaign
	reports   []observerReport
}

func runElection(t *testing.T, rep *chaos.Report, seed uint64, dur time.Duration) {
	const slots, workers = 3, 2
	row := rep.Row(fmt.Sprintf("safety checker, election: %d clients × %d campaigners, %d observers, %v", slots, workers, len(observerNames), dur))
	srv := redistest.Start(t)
	h := newHistory()
	stopCtx, stopAll := context.WithCancel(context.Background())
	defer stopAll()
	skip := map[string]bool{}
	for _, op := range strings.Split(os.Getenv("LOCKKIT_SAFETY_SKIP"), ",") {
		skip[strings.TrimSpace(op)] = true
	}
	wl := &workload{h: h, ttls: electionTTLs, ctx: stopCtx, stop: make(chan struct{}), skip: skip}
	el := &electionLog{}
	options := func() *redis.Options {
		o := srv.Options()
		o.ContextTimeoutEnabled = true
		o.ReadTimeout, o.WriteTimeout, o.DialTimeout = time.Second, time.Second, time.Second
		o.MinRetryBackoff, o.MaxRetryBackoff = 5*time.Millisecond, 60*time.Millisecond
		return o
	}
	var pxs [][]*chaos.Proxy // the fault injector's paths: the campaigners', then the faulted observer's
	all := make([]*slot, slots)
	rdbs := make([]*redis.Client, slots)
	for i := range all {
		px := chaos.NewProxy(t, srv.Addr())
		pxs = append(pxs, []*chaos.Proxy{px})
		rdb := redisVia(t, options(), px.Addr())
		rdb.AddHook(redisHook{h: h, client: i})
		rdbs[i] = rdb
		opts := withPipelining([]core.Option{core.WithHook(coreHook()), core.WithRetryBackoff(10*time.Millisecond, 100*time.Millisecond)})
		sl := &slot{idx: i, px: px, make: func() (*core.Client, error) { return core.New(rdb, opts...) }}
		c, err := sl.make()
		if err != nil {
			t.Fatal(err)
		}
		sl.c, sl.all = c, []*core.Client{c}
		all[i] = sl
	}
	// The observers, each a target of its own in the history (its commands' spans, and for the
	// faulted one the faults on its path: its index among the fault injector's paths).
	var observed sync.WaitGroup
	targets := make([]int, len(observerNames))
	for j := range observerNames {
		var addr string
		targets[j] = 100 + j
		switch {
		case j < len(observerDelays):
			addr = srv.StartDelayProxy(t, observerDelays[j]).Addr()
		case observerNames[j] == "faulted":
			px := chaos.NewProxy(t, srv.Addr())
			targets[j] = len(pxs)
			pxs = append(pxs, []*chaos.Proxy{px})
			addr = px.Addr()
		default:
			addr = srv.Addr()
		}
		rdb := redisVia(t, options(), addr)
		rdb.AddHook(redisHook{h: h, client: targets[j]})
		locks := locktest.NewClient(t, rdb)
		e, err := election.New(locks, rdb, electionName)
		if err != nil {
			t.Fatal(err)
		}
		observed.Add(1)
		go func() {
			defer observed.Done()
			for l := range e.Observe(stopCtx) {
				at := h.now()
				el.mu.Lock()
				el.reports = append(el.reports, observerReport{Observer: j, At: at, Fence: l.Fence, Value: l.Value})
				el.mu.Unlock()
			}
		}()
	}
	watchStop, watched := make(chan struct{}), make(chan struct{})
	go func() { defer close(watched); watch(h, []*redis.Client{srv.Client(t)}, watchStop) }()
	var wg sync.WaitGroup
	for i, sl := range all {
		for k := range workers {
			w := &worker{workload: wl, rnd: rand.New(rand.NewPCG(seed, uint64(i*100+k))), slot: sl}
			wg.Add(1)
			go func() { defer wg.Done(); w.runCampaigns(el, rdbs[i], k) }()
		}
	}
	end := time.Now().Add(dur)
	(&faultRig{h: h, rnd: rand.New(rand.NewPCG(seed, 1<<40)), srvs: []*redistest.Server{srv}, pxs: pxs, skip: skip}).inject(t, end)
	time.Sleep(time.Until(end))
	close(wl.stop)
	stopAll()
	wg.Wait()
	wl.pending.Wait()
	observed.Wait()
	for _, sl := range all {
		for _, c := range sl.all {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_ = c.Close(ctx)
			cancel()
		}
	}
	for deadline := time.Now().Add(5 * time.Second); h.open.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(watchStop)
	<-watched
	r := h.result(false)
	bad, soft := check(r)
	every, minTerm := observeEvery(t)
	obad, st := checkObserve(r, el.campaigns, el.reports, targets, every, minTerm)
	bad = append(bad, obad...)
	slices.SortStableFunc(bad, func(a, b verdict) int { return cmp.Compare(a.At, b.At) })
	t.Logf("election, seed %d: %d campaigns, %d terms; %s", seed, len(el.campaigns), len(r.holds), st)
	report(t, row, h, r, bad, soft, seed, "election")
	saveArtifact(t, "election-observers", seed, map[string]any{"campaigns": el.campaigns, "reports": el.reports})
}

// observeEvery returns whether a term an observer did not report although its path was healthy
// (and a term it reported twice) is a violation, not only counted, and how long such a term lasted
// at least: LOCKKIT_SAFETY_OBSERVE_EVERY=1 (terms of minObservedTerm or more) or =DURATION (e.g.
// 1ns: every term).
func observeEvery(t *testing.T) (bool, time.Duration) {
	switch s := os.Getenv("LOCKKIT_SAFETY_OBSERVE_EVERY"); s {
	case "", "0":
		return false, minObservedTerm
	case "1":
		return true, minObservedTerm
	default:
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("LOCKKIT_SAFETY_OBSERVE_EVERY: %v", err)
		}
		return true, d
	}
}

// runCampaigns campaigns until the workload stops. Each campaign has its own value, a TTL drawn
// from the variant's, and a patience (the caller gives up waiting after 0.2–2 s); a won term is
// held for a few milliseconds (eleven times in sixteen), up to a quarter of its TTL, or (one time
// in sixteen) for one to two TTLs (its renewals run), then resigned — or, now and then, left to the client's Close,
// which replaces the client.
func (w *worker) runCampaigns(el *electionLog, rdb *redis.Client, k int) {
	for n := 0; !w.stopped(); n++ {
		c, gen := w.slot.get()
		ttl := w.ttls[w.rnd.IntN(len(w.ttls))]
		e, err := election.New(c, rdb, electionName, election.WithTTL(ttl))
		if err != nil {
			panic(err)
		}
		cp := &campaign{Value: fmt.Sprintf("c%d.%d-%d", w.slot.idx, k, n)}
		hd := &hold{Client: w.slot.idx, Gen: gen, Name: core.Namespaced("election", electionName), Kind: "term", TTL: ttl}
		ctx, cancel := context.WithCancel(w.ctx)
		give := time.AfterFunc(w.dur(200*time.Millisecond, 2*time.Second), cancel) // patience
		cctx, cl := w.h.newCall(ctx, hd)
		cp.Call = hd.Call
		el.mu.Lock()
		el.campaigns = append(el.campaigns, cp)
		el.mu.Unlock()
		term, err := e.Campaign(cctx, cp.Value)
		give.Stop()
		if err != nil {
			cancel()
			w.failed(cl, nil, err)
			continue
		}
		l, _ := core.FromContext(term.Context())
		cl.acquired(l)
		el.mu.Lock()
		cp.Hold, cp.hd = hd.ID, hd
		el.mu.Unlock()
		var lead time.Duration
		switch r := w.rnd.IntN(16); {
		case r < 11: // a term of a few ms: the next one begins while observers still read this one
			lead = w.dur(0, 3*time.Millisecond)
		case r < 15:
			lead = w.dur(0, ttl/4)
		default: // its renewals run
			lead = w.dur(ttl, 2*ttl)
		}
		tctx := term.Context()
		for end := time.Now().Add(lead); time.Now().Before(end) && tctx.Err() == nil && !w.stopped(); {
			w.sleep(tctx, min(time.Until(end), w.dur(ttl/10, ttl/4)))
			cl.live(tctx)
		}
		cl.live(tctx)
		at := w.h.now()
		el.mu.Lock()
		cp.Resigned = at
		el.mu.Unlock()
		if w.rnd.IntN(20) == 0 && !w.skip["close"] {
			_ = w.slot.replace() // Close releases the term
		} else {
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			w.h.op()
			_ = term.Resign(rctx)
			rcancel()
		}
		cancel()
	}
}
