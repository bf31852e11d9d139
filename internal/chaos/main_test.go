package chaos_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// childEnv names the role of a child process: the test binary re-executed by a test runs that
// role instead of the tests (see runChild).
const childEnv = "LOCKKIT_CHAOS_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	// toxiproxy (third-party) can leave a link's pipe goroutine blocked on a channel send after the
	// proxy is stopped (a no-op or, when a latency toxic was removed mid-stream, a latency toxic's,
	// or the link's reader writing into the stopped toxic chain: seen once after TestChaosSafety);
	// it holds no lockkit state. Everything else must be gone.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write"))
}

// full reports whether the full suite runs (LOCKKIT_CHAOS=full, as `make chaos` sets it); otherwise
// every scenario runs a bounded number of operations so that `go test ./...` stays fast.
func full() bool { return os.Getenv("LOCKKIT_CHAOS") == "full" }

// pick returns bounded or, in a full run, fullN.
func pick(bounded, fullN int) int {
	if full() {
		return fullN
	}
	return bounded
}

// redisVia returns a go-redis client with opts but connected to addr (e.g. a proxy), closed when the
// test ends.
func redisVia(t testing.TB, opts *redis.Options, addr string) *redis.Client {
	t.Helper()
	o := *opts
	o.Addr = addr
	rdb := redis.NewClient(&o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// lossLog records when the Lost hook ran for each fence: core runs it right after the lock's
// context is cancelled and before anything of the hold is given back in Redis (core.Hook's Lost), so
// its time is no earlier than the cancellation and no later than the holder letting anybody in.
type lossLog struct{ ch chan lossEvent }

type lossEvent struct {
	fence int64
	at    time.Time
	why   string
}

func newLossLog() *lossLog { return &lossLog{ch: make(chan lossEvent, 1024)} }

func (l *lossLog) hook() core.Hook {
	return core.Hook{Lost: func(_ context.Context, info core.HoldInfo) {
		ev := lossEvent{fence: info.Lock.Fence(), at: time.Now()}
		var le *core.LostError
		if errors.As(info.Err, &le) {
			ev.why = le.Reason
		}
		l.ch <- ev
	}}
}

// wait returns the loss of fence, waiting at most d.
func (l *lossLog) wait(fence int64, d time.Duration) (lossEvent, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case ev := <-l.ch:
			if ev.fence == fence {
				return ev, true
			}
		case <-t.C:
			return lossEvent{}, false
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestChaos runs every fault scenario (in parallel, each on its own servers) and prints the report
// table. `-run Chaos` selects exactly this.
func TestChaos(t *testing.T) {
	rep := &chaos.Report{}
	t.Run("scenarios", func(t *testing.T) {
		for _, f := range netFaults() {
			t.Run("network/"+f.name, func(t *testing.T) {
				t.Parallel()
				runNetFault(t, rep.Row(f.row), f)
			})
		}
		t.Run("pause", func(t *testing.T) { t.Parallel(); runPause(t, rep) })
		t.Run("starved", func(t *testing.T) { t.Parallel(); runStarved(t, rep) })
		t.Run("linearizability", func(t *testing.T) { t.Parallel(); runLinearizability(t, rep) })
		t.Run("redlock", func(t *testing.T) { t.Parallel(); runRedlock(t, rep) })
		t.Run("cluster", func(t *testing.T) { t.Parallel(); runCluster(t, rep) })
	})
	table := rep.Markdown()
	mode := "bounded"
	if full() {
		mode = "full"
	}
	t.Logf("chaos report (%s run):\n\n%s", mode, table)
	if path := os.Getenv("LOCKKIT_CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}
