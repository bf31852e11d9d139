package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestChaosSafetyRW is the randomized safety checker's read-write variant: workers on several
// clients (each through its own toxiproxy) take the read and the write side of a few read-write
// locks (core.Read, core.Write) by Acquire, TryAcquire and Do, nest reads and writes in their holds
// and try to upgrade (refused), Extend, Release and close their client, while the checker's faults
// hit random paths. The oracle (checkRW) then checks the history: never a writer with a live
// reader or another writer (over-limit, with limits 1 and core.MaxPermits, and lease-count over
// reads of Redis), fences increasing in acquisition order, nested holds keeping their outer hold's
// fence and ending no later than it, and no starved writer (one that waited longer than a bound
// while readers that asked after it were granted). It also runs the lock variants' common checks.
//
// The seed and its replay work as for TestChaosSafety (-seed N or LOCKKIT_SAFETY_SEED); the run
// lasts 6 s (the read-write reverts of docs/reliability.md were found in 0.05 to 3.3 s;
// LOCKKIT_CHAOS=full: 80 s; LOCKKIT_SAFETY_DURATION sets twice this length, as for the permits
// variant).
func TestChaosSafetyRW(t *testing.T) {
	seed := safetySeed(t)
	t.Logf("read-write safety checker seed %d: replay with -args -seed %d or LOCKKIT_SAFETY_SEED=%d", seed, seed, seed)
	dur := halfSafetyDuration(t, time.Duration(pick(6, 80))*time.Second)
	const msec = time.Millisecond
	rep := &chaos.Report{}
	runRW(t, rep, seed, safetyConfig{name: "rw", nodes: 1, slots: 4, workers: 3, names: []string{"rw0", "rw1"},
		ttls: []time.Duration{100 * msec, 200 * msec, 300 * msec, 500 * msec, time.Second, 2 * time.Second}, dur: dur})
	t.Logf("read-write safety checker (seed %d):\n\n%s", seed, rep.Markdown())
}

// rwWorkload is what the read-write workers share besides the lock variants' workload: the
// writers' calls, for the starvation check.
type rwWorkload struct {
	*workload
	mu       sync.Mutex
	writes   []writeCall
	upgrades []verdict // upgrades (and, mixed, self-exclusions) that were not refused
	mixed    bool      // every kind of hold on the names (TestChaosSafetyMixed), not only reads and writes
}

// rwFree is the read-write lock the workers try with a deadline shorter than their delayed replies
// (provokeRW): free but for them.
const rwFree = "rwfree"

// writeCall is a waiting write acquisition (Acquire or Do), granted or not.
type writeCall struct {
	client    int
	name      string
	call, ret time.Duration
	granted   bool
	err       string
}

// runRW sets up a run as runSafety does (one redis-server, a proxy per client), with the read-write
// workload, a watcher of the read-write locks' leases and the read-write oracle.
func runRW(t *testing.T, rep *chaos.Report, seed uint64, cfg safetyConfig) {
	row := rep.Row(fmt.Sprintf("safety checker, %s: %d clients × %d workers, %v", cfg.name, cfg.slots, cfg.workers, cfg.dur))
	srvs := redistest.StartN(t, cfg.nodes)
	h := newHistory()
	stopCtx, stopAll := context.WithCancel(context.Background())
	defer stopAll()
	wl := &rwWorkload{mixed: cfg.mixed, workload: &workload{h: h, names: cfg.names, ttls: cfg.ttls, ctx: stopCtx, stop: make(chan struct{}), skip: map[string]bool{}}}
	for _, op := range strings.Split(os.Getenv("LOCKKIT_SAFETY_SKIP"), ",") {
		wl.skip[strings.TrimSpace(op)] = true
	}
	pxs := make([][]*chaos.Proxy, cfg.slots)
	slots := make([]*slot, cfg.slots)
	for i := range slots {
		px := chaos.NewProxy(t, srvs[0].Addr())
		pxs[i] = []*chaos.Proxy{px}
		o := srvs[0].Options()
		o.ContextTimeoutEnabled = true
		o.ReadTimeout, o.WriteTimeout, o.DialTimeout = time.Second, time.Second, time.Second
		o.MinRetryBackoff, o.MaxRetryBackoff = 5*time.Millisecond, 60*time.Millisecond
		rdb := redisVia(t, o, px.Addr())
		rdb.AddHook(rwRedisHook{redisHook{h: h, client: i}})
		opts := []core.Option{core.WithHook(coreHook()), core.WithRetryBackoff(10*time.Millisecond, 100*time.Millisecond)}
		sl := &slot{idx: i, px: px, make: func() (*core.Client, error) { return core.New(rdb, opts...) }}
		c, err := sl.make()
		if err != nil {
			t.Fatal(err)
		}
		sl.c, sl.all = c, []*core.Client{c}
		slots[i] = sl
	}
	admin := srvs[0].Client(t)
	watchStop, watched, leasesWatched := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { defer close(watched); watch(h, []*redis.Client{admin}, watchStop) }()
	go func() { defer close(leasesWatched); watchRW(h, admin, append(cfg.names, rwFree), watchStop) }()
	var wg sync.WaitGroup
	for i, sl := range slots {
		for k := range cfg.workers {
			w := &rwWorker{worker: &worker{workload: wl.workload, rnd: rand.New(rand.NewPCG(seed, uint64(i*100+k))), slot: sl}, rw: wl}
			wg.Go(w.run)
		}
	}
	rig := &faultRig{h: h, rnd: rand.New(rand.NewPCG(seed, 1<<40)), srvs: srvs, pxs: pxs, skip: wl.skip}
	var operated <-chan struct{} = closed()
	if cfg.mixed { // key losses and the operator (safety_mixed_faults_test.go)
		operated = wl.mixedFaults(t, seed, srvs, admin, rig)
	}
	end := time.Now().Add(cfg.dur)
	rig.inject(t, end)
	time.Sleep(time.Until(end)) // the calm end of the run
	close(wl.stop)
	stopAll()
	<-operated
	wg.Wait()
	wl.pending.Wait()
	for _, sl := range slots {
		for _, c := range sl.all {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_ = c.Close(ctx)
			cancel()
		}
	}
	for deadline := time.Now().Add(5 * time.Second); h.open.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // lock contexts cancelled by Close: their AfterFuncs record it
	}
	close(watchStop)
	<-watched
	<-leasesWatched
	r := h.result(false)
	if cfg.mixed {
		mixedRun(&r)
	}
	wl.mu.Lock()
	writes := append([]writeCall(nil), wl.writes...)
	upgrades := append([]verdict(nil), wl.upgrades...)
	wl.mu.Unlock()
	bad, soft := checkRW(r, writes, upgrades)
	report(t, row, h, r, bad, soft, seed, cfg.name)
	if cfg.mixed {
		mixedRows(t, rep, cfg.name, h, r, bad)
	}
	t.Logf("%d waiting writes, %d granted", len(writes), countGranted(writes))
}

func countGranted(ws []writeCall) int {
	n := 0
	for _, w := range ws {
		if w.granted {
			n++
		}
	}
	return n
}

// watchRW reads the live leases of every read-write lock in names every 25 ms until stop is closed
// (watchPermits' reads, on the {NAME}:rw keys).
func watchRW(h *history, rdb *redis.Client, names []string, stop <-chan struct{}) {
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = locktest.Key(n, "rw")
	}
	script := redis.NewScript(readPermitsSrc)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		from := h.now()
		v, err := script.Run(ctx, rdb, keys).Slice()
		to := h.now()
		cancel()
		if err != nil || len(v) != len(names) {
			continue
		}
		snaps := make([]permitSnap, len(names))
		for i, n := range names {
			snaps[i] = permitSnap{Name: n, From: from, To: to, Leases: parseLeaseRow(v[i])}
		}
		h.mu.Lock()
		h.permits = append(h.permits, snaps...)
		h.mu.Unlock()
	}
}

// parseLeaseRow reads one row of readPermitsSrc's reply: token, ms left, limit, for each lease.
func parseLeaseRow(v any) []lease {
	row, _ := v.([]any)
	var out []lease
	for j := 0; j+2 < len(row); j += 3 {
		tok, _ := row[j].(string)
		var left int64
		var limit int
		_, _ = fmt.Sscan(fmt.Sprint(row[j+1]), &left)
		_, _ = fmt.Sscan(fmt.Sprint(row[j+2]), &limit)
		out = append(out, lease{Tok: tok, Left: time.Duration(left) * time.Millisecond, Limit: limit})
	}
	return out
}

// rwRedisHook is redisHook that also notes the token of a read-write acquisition: its script's
// first key is PREFIX{NAME}:rw (the semaphore's acquire script on the read-write keys).
type rwRedisHook struct{ redisHook }

// ProcessHook implements redis.Hook.
func (r rwRedisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		t0 := r.h.now()
		if c := callOf(ctx); c != nil {
			r.script(c, cmd)
			r.rwScript(c, cmd)
		}
		err := next(ctx, cmd)
		r.done(t0, cmd.Name(), err)
		return err
	}
}

// rwScript notes the token of a read-write acquire script: 6 keys, the first PREFIX{NAME}:rw, and
// not a release or a dequeue (whose second argument is the publish command).
func (r rwRedisHook) rwScript(c *call, cmd redis.Cmder) {
	args := cmd.Args()
	if name := strings.ToLower(cmd.Name()); (name != "eval" && name != "evalsha") || len(args) < 3 {
		return
	}
	nk, ok := args[2].(int)
	if !ok || nk < 4 || len(args) < 3+nk+2 {
		return
	}
	k0, _ := args[3].(string)
	tok, _ := args[3+nk].(string)
	pub, _ := args[4+nk].(string)
	if !strings.HasSuffix(k0, "}:rw") || pub == "PUBLISH" || pub == "SPUBLISH" {
		return
	}
	c.mu.Lock()
	if c.tok == "" {
		c.tok = tok
	}
	c.mu.Unlock()
}

// halfSafetyDuration is the length of a variant that runs for half of LOCKKIT_SAFETY_DURATION when
// it is set (as the permits variant does), else def.
func halfSafetyDuration(t *testing.T, def time.Duration) time.Duration {
	s := os.Getenv("LOCKKIT_SAFETY_DURATION")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("LOCKKIT_SAFETY_DURATION: %v", err)
	}
	return d / 2
}
