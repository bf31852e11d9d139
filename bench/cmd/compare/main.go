// Command compare measures lockkit side by side with the Redis locks users would pick instead
// (a raw SET NX floor, go-redsync/redsync v4, bsm/redislock) on redis-servers it starts itself, and
// writes the tables to a markdown file. Run it from the bench module:
//
//	cd bench && go run ./cmd/compare -rounds 3 -out ../docs/benchmarks.md
//
// Libraries are interleaved: every round runs each scenario for every library, in an order
// rotated from round to round, so machine noise hits all of them alike. Each figure is the
// median of the rounds with their min–max. -quick gives a short run (about 2 minutes).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// params sizes a run.
type params struct {
	ttl         time.Duration // TTL of every lock in the timed scenarios (redsync's default expiry)
	window      time.Duration // uncontended measurement
	hotWindow   time.Duration // hot-key measurement
	sweepWindow time.Duration
	warm        time.Duration // hot-key warm-up
	workers     int           // goroutines on the hot key
	goroutines  []int         // uncontended
	redlockG    []int         // uncontended over 3 nodes
	holds       []time.Duration
	heldN       int           // locks held at once
	heldTTL     time.Duration // their TTL; lockkit renews at a third of it, the DIY ticker too
	observe     time.Duration // how long held locks are observed
	// heldFastTTL and heldFastObserve: lockkit's row at a short TTL (issue #38: 3 s, 20 s).
	heldFastTTL, heldFastObserve time.Duration
	fgPace, fgIdle               time.Duration // the foreground acquire+release beside held locks: its pace, its idle window
	sweep                        bool
}

func fullParams() params {
	return params{ttl: 8 * time.Second, window: 2 * time.Second, hotWindow: 3 * time.Second,
		sweepWindow: 2 * time.Second, warm: 300 * time.Millisecond, workers: 8,
		goroutines: []int{1, 16, 64}, redlockG: []int{1, 16, 64}, holds: []time.Duration{0, time.Millisecond},
		// A 15 s TTL: with 3 s, 100 000 DIY tickers need 100 000 refreshes a second, which saturates a
		// 2-core machine and starves the acquisitions themselves.
		heldN: 100_000, heldTTL: 15 * time.Second, observe: 10 * time.Second,
		heldFastTTL: 3 * time.Second, heldFastObserve: 20 * time.Second, fgPace: 5 * time.Millisecond, fgIdle: 5 * time.Second,
		sweep: true}
}

func quickParams() params {
	p := fullParams()
	p.window, p.hotWindow, p.sweepWindow, p.warm = 400*time.Millisecond, 700*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond
	p.heldN, p.observe, p.heldFastObserve, p.fgIdle, p.sweep = 20_000, 5*time.Second, 5*time.Second, 2*time.Second, false
	return p
}

type harness struct {
	start   time.Time
	servers []*server
	p       params
	res     *store
	log     io.Writer
}

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(args []string, logw io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(logw)
	rounds := fs.Int("rounds", 3, "rounds (each figure is the median of the rounds, with min–max); at least 1")
	out := fs.String("out", "", "markdown file to write (default: stdout)")
	quick := fs.Bool("quick", false, "short windows, 20 000 held locks, no sweep: about 2 minutes")
	sweep := fs.Bool("sweep", true, "also run the retry-setting sweep of the anchors (off with -quick unless given)")
	only := fs.String("only", "", "comma-separated scenarios to run (uncontended,hot,redlock,held,sweep,sets,rw); default all")
	bin := fs.String("redis-server", "redis-server", "redis-server binary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *rounds < 1 {
		return errors.New("-rounds must be at least 1")
	}
	p := fullParams()
	if *quick {
		p = quickParams()
	}
	sweepSet := false
	fs.Visit(func(f *flag.Flag) { sweepSet = sweepSet || f.Name == "sweep" })
	if sweepSet || !*quick {
		p.sweep = *sweep
	}
	want, err := parseOnly(*only)
	if err != nil {
		return err
	}
	if !want["sweep"] {
		p.sweep = false
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	info := collectMachine(*bin, args)
	servers, err := startServers(*bin, 3)
	if err != nil {
		return err
	}
	defer stopServers(servers)
	h := &harness{start: time.Now(), servers: servers, p: p, res: newStore(), log: logw}
	fmt.Fprintf(logw, "compare: %d rounds, redis-servers on %s\n", *rounds, addrs(servers))
	for r := range *rounds {
		if err := h.round(ctx, r, *rounds, want); err != nil {
			return err
		}
	}
	info.finish()
	var w io.Writer = os.Stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if err := writeReport(w, h, info, *rounds, want); err != nil {
		return err
	}
	if *out != "" {
		fmt.Fprintf(logw, "compare: wrote %s in %s\n", *out, time.Since(info.start).Round(time.Second))
	}
	return nil
}

func scenarioNames() []string {
	return []string{"uncontended", "hot", "redlock", "held", "sweep", "sets", "rw"}
}

func parseOnly(s string) (map[string]bool, error) {
	want := map[string]bool{}
	if s == "" {
		for _, n := range scenarioNames() {
			want[n] = true
		}
		return want, nil
	}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		ok := false
		for _, k := range scenarioNames() {
			ok = ok || k == n
		}
		if !ok {
			return nil, fmt.Errorf("-only: unknown scenario %q (want %s)", n, strings.Join(scenarioNames(), ","))
		}
		want[n] = true
	}
	return want, nil
}

func addrs(ss []*server) string {
	var a []string
	for _, s := range ss {
		a = append(a, s.addr)
	}
	return strings.Join(a, " ")
}

// rotate returns cs starting at position r: each round starts with another library.
func rotate[T any](cs []T, r int) []T {
	k := r % len(cs)
	return append(append([]T(nil), cs[k:]...), cs[:k]...)
}

func uncontendedConfigs() []config {
	return []config{rawConfig(), rawAutoConfig(), rawCoalescedConfig(), twoScriptConfig(false), twoScriptConfig(true),
		lockkitConfig(), lockkitPipelinedConfig(pipelineThreshold, false), lockkitPipelinedConfig(2, false),
		redsyncDefaults(1), redislockDefaults()}
}

func hotConfigs() []config {
	return []config{rawConfig(), lockkitConfig(), lockkitFairConfig(), lockkitPipelinedConfig(pipelineThreshold, false),
		lockkitPipelinedConfig(pipelineThreshold, true), lockkitPipelinedConfig(2, false), redsyncDefaults(1), redsyncTuned(1),
		redislockDefaults(), redislockTuned()}
}

func redlockUncontendedConfigs() []config {
	return []config{lockkitRedlockConfig(), lockkitRedlockPipelinedConfig(), redsyncDefaults(3)}
}

func redlockHotConfigs() []config {
	return []config{lockkitRedlockConfig(), lockkitRedlockPipelinedConfig(), redsyncDefaults(3), redsyncTuned(3)}
}

// round runs every scenario once for every library.
func (h *harness) round(ctx context.Context, r, rounds int, want map[string]bool) error {
	step := func(scn, param, row string, m metrics, err error) error {
		tag := fmt.Sprintf("[round %d/%d %s]", r+1, rounds, time.Since(h.start).Round(time.Second))
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			fmt.Fprintf(h.log, "%s %s %s %s: ERROR %v\n", tag, scn, param, row, err)
			h.res.fail(scn, param, row, err)
			return nil
		}
		fmt.Fprintf(h.log, "%s %s %s %s: %s\n", tag, scn, param, row, m.brief())
		h.res.add(scn, param, row, r, m)
		return nil
	}
	if want["uncontended"] {
		for _, g := range h.p.goroutines {
			for _, cfg := range rotate(uncontendedConfigs(), r) {
				m, err := h.measureUncontended(ctx, "u", cfg, g, r)
				if err := step("uncontended", gParam(g), cfg.name, m, err); err != nil {
					return err
				}
			}
		}
	}
	if want["hot"] {
		for _, hold := range h.p.holds {
			for _, cfg := range rotate(hotConfigs(), r) {
				m, err := h.measureHot(ctx, "h", cfg, hold, h.p.hotWindow, r)
				if err := step("hot", holdParam(hold), cfg.name, m, err); err != nil {
					return err
				}
			}
		}
	}
	if want["redlock"] {
		for _, g := range h.p.redlockG {
			for _, cfg := range rotate(redlockUncontendedConfigs(), r) {
				m, err := h.measureUncontended(ctx, "ru", cfg, g, r)
				if err := step("redlock-uncontended", gParam(g), cfg.name, m, err); err != nil {
					return err
				}
			}
		}
		for _, hold := range h.p.holds {
			for _, cfg := range rotate(redlockHotConfigs(), r) {
				m, err := h.measureHot(ctx, "rh", cfg, hold, h.p.hotWindow, r)
				if err := step("redlock-hot", holdParam(hold), cfg.name, m, err); err != nil {
					return err
				}
			}
		}
	}
	if want["held"] {
		for _, hc := range rotate(heldConfigs(h.p), r) {
			m, err := h.measureHeld(ctx, hc, r)
			if err := step("held", fmt.Sprintf("%d locks", h.p.heldN), hc.name, m, err); err != nil {
				return err
			}
		}
	}
	if want["sets"] {
		if err := h.measureSets(ctx, r, step); err != nil {
			return err
		}
	}
	if want["rw"] {
		for _, cfg := range rotate(rwConfigs(), r) {
			m, err := h.measureRW(ctx, cfg, r)
			if err := step("rw", fmt.Sprint(rwReaders), cfg.name, m, err); err != nil {
				return err
			}
		}
	}
	if h.p.sweep {
		for _, hold := range h.p.holds {
			for _, cfg := range rotate(sweepConfigs(), r) {
				m, err := h.measureHot(ctx, "s", cfg, hold, h.p.sweepWindow, r)
				if err := step("sweep", holdParam(hold), cfg.name, m, err); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func gParam(g int) string { return fmt.Sprintf("%d", g) }

func holdParam(d time.Duration) string {
	if d == 0 {
		return "0 ms"
	}
	return fmt.Sprintf("%g ms", ms(d))
}
