package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// sceneDef is one scene of the tour.
type sceneDef struct {
	title string // the progress line
	short string // the summary table's name
	run   func(ctx context.Context, s *scene) error
	read  string // "FILE, func NAME": where the scene is done (FILE from the repository's root)
}

// scenes lists the tour in order; -scene N picks scenes[N-1].
var scenes = []sceneDef{
	{"contention: three replicas, one lock, waiters woken on release", "three replicas, one lock", sceneContention, "examples/demo/scene_locks.go, func sceneContention"},
	{"lost lock: the holder's context is cancelled when the lock is taken away", "lost lock", sceneLost, "examples/demo/scene_locks.go, func sceneLost"},
	{"HTTP idempotency: a POST, its replay, a 409 and a 422", "HTTP idempotency", sceneHTTP, "examples/demo/scene_http.go, func sceneHTTP"},
	{"gRPC: calls for one key serialised across two replicas", "gRPC per-key lock", sceneGRPC, "examples/demo/scene_grpc.go, func sceneGRPC"},
	{"asynq: tasks with one key run one at a time across two workers", "asynq per-key lock", sceneAsynq, "examples/demo/scene_asynq.go, func sceneAsynq"},
	{"cron: a job on three replicas runs once per tick", "cron once per tick", sceneCron, "examples/demo/scene_cron.go, func sceneCron"},
	{"semaphore: at most three exports of a tenant at once, across two replicas", "semaphore, 3 permits", scenePermits, "examples/demo/scene_permits.go, func scenePermits"},
	{"gocron: two schedulers with skewed clocks run each run of a job once", "gocron once per run", sceneGocron, "examples/demo/scene_gocron.go, func sceneGocron"},
	{"sets: transfers lock both accounts at once, all or nothing, without deadlock", "sets of locks", sceneSets, "examples/demo/scene_sets.go, func sceneSets"},
	{"read-write lock: readers share, a writer runs alone, in arrival order", "read-write lock", sceneReadWrite, "examples/demo/scene_rw.go, func sceneReadWrite"},
}

// sceneTimeout bounds a scene, so that a hang shows as a failed scene, not a stuck demo.
const sceneTimeout = 30 * time.Second

// demo is what the scenes share: the Redis options, the output and the tracing.
type demo struct {
	opts    *redis.Options
	out     io.Writer
	runID   string
	tracing *tracing
}

// check is one assertion of a scene.
type check struct {
	ok   bool
	text string
}

// result is the outcome of one scene, for the summary table.
type result struct {
	n      int
	name   string
	checks []check
	dur    time.Duration
}

func (r result) passed() (int, bool) {
	n := 0
	for _, c := range r.checks {
		if c.ok {
			n++
		}
	}
	return n, len(r.checks) > 0 && n == len(r.checks)
}

// scene is the state of one running scene: its checks and what to close when it ends.
type scene struct {
	*demo
	mu      sync.Mutex
	checks  []check
	closers []func()
}

// runScene runs scene n and prints its progress line, its story and its checks.
func (d *demo) runScene(ctx context.Context, n int, def sceneDef) result {
	fmt.Fprintf(d.out, "\n[%d/%d] %s\n", n, len(scenes), def.title)
	fmt.Fprintf(d.out, "      read: %s\n", def.read)
	s := &scene{demo: d}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, sceneTimeout)
	err := def.run(sctx, s)
	cancel()
	s.close()
	if err != nil {
		s.check(false, "scene ran to the end: %v", err)
	}
	res := result{n: n, name: def.short, checks: s.checks, dur: time.Since(start)}
	ok, all := res.passed()
	verdict := "passed"
	if !all {
		verdict = "FAILED"
	}
	fmt.Fprintf(d.out, "      %s: %d/%d checks held in %s\n", verdict, ok, len(res.checks), fmtDur(res.dur))
	if d.tracing.rec != nil {
		printTraces(d.out, d.tracing.rec.drain(), maxTraces)
	}
	return res
}

// logf prints a line of the scene's story.
func (s *scene) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "      "+format+"\n", args...)
}

// check records and prints an assertion; it returns ok.
func (s *scene) check(ok bool, format string, args ...any) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := check{ok: ok, text: fmt.Sprintf(format, args...)}
	s.checks = append(s.checks, c)
	mark := "✓"
	if !ok {
		mark = "✗"
	}
	fmt.Fprintf(s.out, "      %s %s\n", mark, c.text)
	return ok
}

// storyWriter writes the lines of a client's log into the scene's story ("log: level=WARN …").
type storyWriter struct{ s *scene }

func (w storyWriter) Write(p []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimSuffix(string(p), "\n"), "\n") {
		w.s.logf("  log: %s", line)
	}
	return len(p), nil
}

// onClose registers f to run when the scene ends, in reverse order of registration.
func (s *scene) onClose(f func()) { s.closers = append(s.closers, f) }

func (s *scene) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// newRedis returns a go-redis client of the scene's Redis, closed when the scene ends: one per
// "replica", as separate processes would have.
func (s *scene) newRedis() *redis.Client {
	opts := *s.opts
	rdb := redis.NewClient(&opts)
	s.onClose(func() { _ = rdb.Close() })
	return rdb
}

// newLocks returns a lock client over its own Redis connection, closed when the scene ends. With
// tracing on, lockotel's hook is installed after opts' hooks. What the client logs (a lost lock, a
// failed renewal) is a line of the scene's story, in its place, not a stray line on stderr.
func (s *scene) newLocks(opts ...core.Option) (*core.Client, *redis.Client, error) {
	opts = append([]core.Option{core.WithLogger(slog.New(slog.NewTextHandler(storyWriter{s}, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})))}, opts...)
	rdb := s.newRedis()
	if s.tracing.hook != nil {
		opts = append(opts, core.WithHook(*s.tracing.hook))
	}
	c, err := core.New(rdb, opts...)
	if err != nil {
		return nil, nil, err
	}
	s.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c, rdb, nil
}

// sleep waits for d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// printSummary prints the table of results and the failed checks; it reports whether all passed.
func printSummary(w io.Writer, results []result, total time.Duration) bool {
	fmt.Fprintf(w, "\n  %-2s %-26s %-7s %-7s %s\n", "#", "scene", "checks", "result", "time")
	all := len(results) > 0
	var failed []string
	for _, r := range results {
		ok, pass := r.passed()
		verdict := "PASS"
		if !pass {
			verdict, all = "FAIL", false
			for _, c := range r.checks {
				if !c.ok {
					failed = append(failed, fmt.Sprintf("  scene %d: ✗ %s", r.n, c.text))
				}
			}
		}
		fmt.Fprintf(w, "  %-2d %-26s %-7s %-7s %s\n", r.n, r.name, fmt.Sprintf("%d/%d", ok, len(r.checks)), verdict, fmtDur(r.dur))
	}
	if all {
		plural := "s"
		if len(results) == 1 {
			plural = ""
		}
		fmt.Fprintf(w, "  all %d scene%s passed in %s\n", len(results), plural, fmtDur(total))
	} else {
		fmt.Fprintf(w, "  FAILED after %s\n%s\n", fmtDur(total), strings.Join(failed, "\n"))
	}
	return all
}

// fmtDur rounds d for display: 3 significant figures or so.
func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= 100*time.Microsecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

// interval is a stretch of time some work ran, for the timelines of scenes 4 and 5.
type interval struct {
	label      string
	key        string
	start, end time.Time
	fence      int64
}

// overlaps counts the intervals (sorted by start) that start before the previous one ended.
func overlaps(iv []interval) int {
	n := 0
	for i := 1; i < len(iv); i++ {
		if iv[i].start.Before(iv[i-1].end) {
			n++
		}
	}
	return n
}

// fencesIncrease reports whether the fences of the intervals (sorted by start) strictly increase.
func fencesIncrease(iv []interval) bool {
	for i := 1; i < len(iv); i++ {
		if iv[i].fence <= iv[i-1].fence {
			return false
		}
	}
	return len(iv) > 0
}

// timeline prints intervals (sorted by start) as bars on a common time axis starting at t0.
func (s *scene) timeline(t0 time.Time, iv []interval) {
	if len(iv) == 0 {
		return
	}
	const width = 36
	end := iv[0].end
	for _, x := range iv {
		if x.end.After(end) {
			end = x.end
		}
	}
	span := max(end.Sub(t0), time.Millisecond)
	col := func(t time.Time) int { return min(width, max(0, int(int64(width)*int64(t.Sub(t0))/int64(span)))) }
	for _, x := range iv {
		a, b := col(x.start), max(col(x.end), col(x.start)+1)
		bar := strings.Repeat(" ", a) + strings.Repeat("█", min(b, width)-a) + strings.Repeat(" ", width-min(b, width))
		s.logf("%-18s |%s| %7s–%-7s fence %d", x.label, bar, fmtMs(x.start.Sub(t0)), fmtMs(x.end.Sub(t0)), x.fence)
	}
}

// fmtMs prints d as whole milliseconds, "+123ms".
func fmtMs(d time.Duration) string { return fmt.Sprintf("+%dms", d.Milliseconds()) }
