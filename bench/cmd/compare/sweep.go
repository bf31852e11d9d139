package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
)

// sweepConfigs are the retry settings tried for the anchors on the hot key; the one with the
// lowest wait p99 over both holds is the "tuned" row of the main tables (redsyncTuned,
// redislockTuned). The sweep table lets a reader check that choice on their machine.
func sweepConfigs() []config {
	forever := redsync.WithTries(math.MaxInt32)
	delay := func(d time.Duration) redsync.Option { return redsync.WithRetryDelay(d) }
	linear := func(d time.Duration) func() redislock.RetryStrategy {
		return func() redislock.RetryStrategy { return redislock.LinearBackoff(d) }
	}
	return []config{
		redsyncConfig("redsync delay 100µs", 1, "WithTries(math.MaxInt32), WithRetryDelay(100µs)", forever, delay(100*time.Microsecond)),
		redsyncConfig("redsync delay 1ms", 1, "WithTries(math.MaxInt32), WithRetryDelay(1ms)", forever, delay(time.Millisecond)),
		redsyncConfig("redsync delay 1–5ms", 1, "WithTries(math.MaxInt32), WithRetryDelayFunc(uniform 1–5 ms)", forever,
			redsync.WithRetryDelayFunc(func(int) time.Duration {
				return time.Millisecond + rand.N(4*time.Millisecond)
			})),
		redsyncConfig("redsync delay 10ms", 1, "WithTries(math.MaxInt32), WithRetryDelay(10ms)", forever, delay(10*time.Millisecond)),
		redislockConfig("redislock linear 100µs", "LinearBackoff(100µs)", linear(100*time.Microsecond)),
		redislockConfig("redislock linear 1ms", "LinearBackoff(1ms)", linear(time.Millisecond)),
		redislockConfig("redislock linear 10ms", "LinearBackoff(10ms)", linear(10*time.Millisecond)),
		redislockConfig("redislock exponential 1ms–16ms", "ExponentialBackoff(1ms, 16ms) (its first retry waits 4 ms)",
			func() redislock.RetryStrategy {
				return redislock.ExponentialBackoff(time.Millisecond, 16*time.Millisecond)
			}),
	}
}

// tunedSweepRow names the sweep row whose setting a library's tuned row uses.
func tunedSweepRow(family string) string {
	switch family {
	case "redsync":
		return "redsync delay 1ms"
	case "redislock":
		return "redislock linear 100µs"
	}
	return ""
}

// writeSweep writes the sweep table, which setting won it per library, and how lockkit (from
// the hot-key table of the same rounds) compares with every setting tried.
func writeSweep(w io.Writer, s *store, p params) {
	fmt.Fprintf(w, "## How the tuned settings were chosen\n\nRetry settings tried on the hot key (%d goroutines, %s windows, same rounds as above). \"Best\" = lowest mean, over both holds, of the median wait p99.\n\n", p.workers, p.sweepWindow)
	s.table(w, "sweep", "hold", sweepCols())
	for _, fam := range []string{"redsync", "redislock"} {
		best, bestScore := "", math.Inf(1)
		for _, c := range sweepConfigs() {
			if c.family != fam {
				continue
			}
			var sum float64
			n := 0
			for _, hold := range s.params["sweep"] {
				if sp := s.get("sweep", hold, c.name, "wait_p99_ms"); sp.n > 0 {
					sum += sp.med
					n++
				}
			}
			if n == len(s.params["sweep"]) && n > 0 && sum/float64(n) < bestScore {
				best, bestScore = c.name, sum/float64(n)
			}
		}
		if best == "" {
			continue
		}
		verdict := "the tuned rows use it"
		if best != tunedSweepRow(fam) {
			verdict = fmt.Sprintf("**the tuned rows use %s instead**: re-check them", tunedSweepRow(fam))
		}
		fmt.Fprintf(w, "- %s: best in this run is *%s* (mean wait p99 %s ms); %s.\n", fam, best, num(bestScore), verdict)
	}
	fmt.Fprintf(w, "\nlockkit (hot-key table) against every setting tried: a shorter retry delay buys a lower wait at the price of more commands, so no single setting is best on both.\n\n")
	fmt.Fprintf(w, "| hold | setting | its wait p99 ms | lockkit's | lockkit lower | its top-level cmds/cs | lockkit's | lockkit lower |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, hold := range s.params["sweep"] {
		lw, lc := s.get("hot", hold, "lockkit", "wait_p99_ms"), s.get("hot", hold, "lockkit", "top_cs")
		for _, row := range s.rows["sweep"] {
			ow, oc := s.get("sweep", hold, row, "wait_p99_ms"), s.get("sweep", hold, row, "top_cs")
			if ow.n == 0 || lw.n == 0 {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", hold, row, num(ow.med), num(lw.med), yesNo(lw.med < ow.med),
				num(oc.med), num(lc.med), yesNo(lc.med < oc.med))
		}
	}
	fmt.Fprintln(w)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}
