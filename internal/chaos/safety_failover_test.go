package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/redis/go-redis/v9"
)

// The failover variant of the safety checker (TestChaosSafety/failover): a real master and replica
// (safety_failover_rig_test.go), clients whose paths follow the master, workers taking locks and
// permits with every operation of the lock variants plus long holds (holdLong) that a failover
// finds held, and a schedule of failovers while holders hold — the master killed or stopped and
// the replica promoted, a replica that stalls right after acknowledging an acquisition (longer
// than its TTL, while its holder keeps renewing on the master) and is then promoted — between
// storms of the other variants' path faults. It runs twice: without WithReplicaAck ("noack"),
// and with core.WithReplicaAck(1, failoverAckWait) on every client but one ("ack": the plain
// client is another owner who may take a name the moment the new master lets it). The oracle is
// checkFailover.

// failoverAckWait is the WithReplicaAck timeout of the ack sub-variant.
const failoverAckWait = 200 * time.Millisecond

// failoverTTLs are the variant's TTLs: short, so that a stall outlasts them and failovers find
// renewals in flight.
var failoverTTLs = []time.Duration{200 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond,
	700 * time.Millisecond, time.Second, 2 * time.Second}

// runFailover runs the two sub-variants, each on its own servers: without WithReplicaAck for
// noackDur, with it for ackDur.
func runFailover(t *testing.T, rep *chaos.Report, seed uint64, noackDur, ackDur time.Duration) {
	t.Run("noack", func(t *testing.T) { runFailoverVariant(t, rep, seed, false, noackDur) })
	t.Run("ack", func(t *testing.T) { runFailoverVariant(t, rep, seed, true, ackDur) })
}

func runFailoverVariant(t *testing.T, rep *chaos.Report, seed uint64, ack bool, dur time.Duration) {
	const slots, workers = 4, 3 // workers 0 and 1 of a slot take locks, worker 2 permits
	name := "failover"
	if ack {
		name = "failover-ack"
	}
	row := rep.Row(fmt.Sprintf("safety checker, %s: %d clients × %d workers, %v", name, slots, workers, dur))
	h := newHistory()
	ft := startFailoverTopo(t, h, slots)
	stopCtx, stopAll := context.WithCancel(context.Background())
	defer stopAll()
	skip := map[string]bool{}
	for _, op := range strings.Split(os.Getenv("LOCKKIT_SAFETY_SKIP"), ",") {
		skip[strings.TrimSpace(op)] = true
	}
	stop := make(chan struct{})
	locks := &workload{h: h, names: []string{"f0", "f1"}, ttls: failoverTTLs, fair: true, ctx: stopCtx, stop: stop, skip: skip}
	limits := map[string][]int{"q0": {2}, "q1": {2, 3}}
	permits := &workload{h: h, names: []string{"q0", "q1"}, ttls: failoverTTLs, fair: true, limits: limits, ctx: stopCtx, stop: stop, skip: skip}
	acked := make([]bool, slots)
	pxs := make([][]*chaos.Proxy, slots)
	all := make([]*slot, slots)
	for i := range all {
		px := chaos.NewProxy(t, ft.paths[i].Addr())
		pxs[i] = []*chaos.Proxy{px}
		o := ft.srvs[0].Options()
		o.ContextTimeoutEnabled = true
		o.ReadTimeout, o.WriteTimeout, o.DialTimeout = time.Second, time.Second, time.Second
		o.MinRetryBackoff, o.MaxRetryBackoff = 5*time.Millisecond, 60*time.Millisecond
		rdb := redisVia(t, o, px.Addr())
		rdb.AddHook(redisHook{h: h, client: i})
		opts := withPipelining([]core.Option{core.WithHook(coreHook()), core.WithRetryBackoff(10*time.Millisecond, 100*time.Millisecond)})
		if acked[i] = ack && i < slots-1; acked[i] {
			opts = append(opts, core.WithReplicaAck(1, failoverAckWait))
		}
		sl := &slot{idx: i, px: px, make: func() (*core.Client, error) { return core.New(rdb, opts...) }}
		c, err := sl.make()
		if err != nil {
			t.Fatal(err)
		}
		sl.c, sl.all = c, []*core.Client{c}
		all[i] = sl
	}
	ft.acked = acked
	ao := ft.srvs[0].Options()
	ao.ReadTimeout, ao.WriteTimeout, ao.DialTimeout = time.Second, time.Second, time.Second
	admin := redisVia(t, ao, ft.admin.Addr())
	watchStop, watched, permitsWatched := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { defer close(watched); watch(h, []*redis.Client{admin}, watchStop) }()
	go func() { defer close(permitsWatched); watchPermits(h, admin, limits, watchStop) }()
	var wg sync.WaitGroup
	for i, sl := range all {
		for k := range workers {
			w := &worker{workload: locks, rnd: rand.New(rand.NewPCG(seed, uint64(i*100+k))), slot: sl}
			if k == 2 {
				w.workload = permits
			}
			wg.Add(1)
			go func() { defer wg.Done(); w.runFailover() }()
		}
	}
	end := time.Now().Add(dur)
	ft.inject(rand.New(rand.NewPCG(seed, 1<<40)), end, pxs, skip)
	time.Sleep(time.Until(end)) // the calm end of the run
	close(stop)
	stopAll()
	wg.Wait()
	locks.pending.Wait()
	permits.pending.Wait()
	for _, sl := range all {
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
	<-permitsWatched
	r := h.result(false)
	bad, soft, st := checkFailover(r, ft.fos, acked)
	kinds := map[string]int{}
	for _, f := range ft.fos {
		kinds[f.Kind]++
	}
	t.Logf("%s, seed %d: %d failovers %v; %s\n%s", name, seed, len(ft.fos), sortedCounts(kinds), st, describeFailovers(ft.fos))
	report(t, row, h, r, bad, soft, seed, name)
	saveArtifact(t, name+"-failovers", seed, map[string]any{"acked": acked, "failovers": ft.fos})
}

// runFailover loops until the workload stops: the lock or permit operations of the other
// variants, and long holds.
func (w *worker) runFailover() {
	for !w.stopped() {
		if w.limits != nil {
			if w.provokePermit() {
				continue
			}
			switch r := w.rnd.IntN(1000); {
			case r < 3 && !w.skip["close"]:
				_ = w.slot.replace()
			case r < 200:
				w.permit("try")
			case r < 350 && !w.skip["do"]:
				w.permitDo()
			case r < 550 && !w.skip["long"]:
				w.holdLong()
			default:
				w.permit("acquire")
			}
			continue
		}
		if w.provoke() {
			continue
		}
		switch r := w.rnd.IntN(1000); {
		case r < 3 && !w.skip["close"]:
			_ = w.slot.replace()
		case r < 120:
			w.fresh("try")
		case r < 270 && !w.skip["do"]:
			w.do()
		case r < 400 && !w.skip["owner"]:
			w.owner()
		case r < 600 && !w.skip["long"]:
			w.holdLong()
		default:
			w.fresh("acquire")
		}
	}
}

// holdLong takes a lock or a permit (TTL at most a second) and holds it for two to four TTLs, so
// that its renewals run and a failover or a stalled replica finds it held; a lock is offered to
// WithOwner re-entries and re-entered through its context now and then, and either is extended
// (longer, or shorter) now and then.
func (w *worker) holdLong() {
	c, gen := w.slot.get()
	var ttls []time.Duration
	for _, d := range w.ttls {
		if d <= time.Second {
			ttls = append(ttls, d)
		}
	}
	hd := &hold{Client: w.slot.idx, Gen: gen, Name: w.names[w.rnd.IntN(len(w.names))], Kind: "long", TTL: ttls[w.rnd.IntN(len(ttls))]}
	opts := []core.AcquireOption{core.WithWait(w.dur(100*time.Millisecond, time.Second))}
	if w.limits != nil {
		ls := w.limits[hd.Name]
		hd.Limit = ls[w.rnd.IntN(len(ls))]
		opts = append(opts, core.Permits(hd.Limit))
	}
	ctx, cancel := w.callCtx()
	defer cancel()
	cctx, cl := w.h.newCall(ctx, hd)
	l, err := c.Acquire(cctx, hd.Name, hd.TTL, opts...)
	if err != nil {
		w.failed(cl, l, err)
		return
	}
	cl.acquired(l)
	share := hd.Limit == 0 && w.rnd.IntN(2) == 0
	if share {
		w.reg.add(shared{id: hd.ID, client: hd.Client, name: hd.Name, tok: hd.Tok, ttl: hd.TTL})
	}
	lctx := l.Context()
	for end := time.Now().Add(w.dur(2*hd.TTL, 4*hd.TTL)); time.Now().Before(end) && lctx.Err() == nil && !w.stopped(); {
		switch r := w.rnd.IntN(10); {
		case r < 2 && hd.Limit == 0 && !w.skip["ctx"]:
			w.reenter(l, hd, true)
		case r == 9 && !w.skip["extend"]:
			w.extend(l, cl, share)
		}
		w.sleep(lctx, min(time.Until(end), w.dur(hd.TTL/10, hd.TTL/4)))
		cl.live(lctx)
	}
	w.reg.remove(hd.ID)
	cl.live(lctx)
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rcancel()
	w.h.op()
	_ = l.Release(rctx)
}

// saveArtifact writes v as JSON beside report's history when LOCKKIT_CHAOS_ARTIFACTS is set.
func saveArtifact(t *testing.T, name string, seed uint64, v any) {
	dir := os.Getenv("LOCKKIT_CHAOS_ARTIFACTS")
	if dir == "" {
		return
	}
	b, err := json.MarshalIndent(v, "", " ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("safety-%s-%d.json", name, seed)), b, 0o644)
	}
	if err != nil {
		t.Error(err)
	}
}
