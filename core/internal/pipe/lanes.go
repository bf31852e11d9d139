package pipe

import (
	"cmp"
	"sync"
	"sync/atomic"
	"time"
)

// Above the threshold a command takes one of two lanes: the pipeliner, or straight out on the
// client as below it. lanes decides, epoch by epoch, between two policies:
//
//   - piped: every command goes through the pipeliner (the cheapest in CPU per command);
//   - split: at most half of the Sender's commands in flight are in the pipeliner, the others go
//     straight out on their own connections.
//
// go-redis's pipeliner keeps one batch in flight, so client and Redis work in turn: on a machine
// with idle cores, commands sent straight out, which Redis serves while the pipeline's callers
// run, do better; on a busy one, the CPU piping saves is what counts (bench/AUTOPIPELINE.md §9
// has the figures). The Sender cannot see the machine, so it measures: the policy under which its
// commands are done faster (wall time per command over an epoch: in a closed loop, the
// throughput; a command's latency would not show the CPU splitting costs its callers) is kept,
// and the other one is tried again now and then. In an open loop neither gains the margin and
// piping everything, the cheaper, stays.
type lanes struct {
	split atomic.Bool  // the current epoch's policy
	piped atomic.Int64 // the Sender's commands in the pipeliner now
	n     atomic.Int64 // commands done in this epoch

	mu      sync.Mutex // serialises ending an epoch; guards the fields below
	start   time.Time  // when this epoch started
	settle  bool       // the policy just changed: this (short) epoch is not measured
	pref    int        // the policy run outside probes (0: piped, 1: split)
	since   int        // measured epochs since the last probe
	probing bool       // a probe has started: its measured epoch is not over
	every   int        // measured epochs between probes (probeEvery, doubled while probes lose)
	mean    [2]float64 // wall time per command (ns) under each policy, EWMA; 0: not measured yet
}

const (
	// epochLen commands make an epoch: 25 ms at 40 000 commands a second.
	epochLen = 1024
	// settleLen commands make the unmeasured epoch after a switch (the pipeliner's waves re-form).
	settleLen = 256
	// probeEvery measured epochs, the policy not chosen runs one (after its settling one). A
	// probe that loses clearly doubles the interval, up to probeMax; one that does not puts it
	// back. Each probe costs on a busy machine (§9: 3 % at 16 goroutines, 11 % at 64).
	probeEvery = 24
	probeMax   = 192
	// margin: the other policy is preferred once its time per command is this much lower.
	margin = 0.1
)

// splitNow reports whether a command above the threshold, with n of the Sender's commands in
// flight (itself included), should go straight out instead of into the pipeliner.
func (l *lanes) splitNow(n int64) bool {
	return l.split.Load() && 2*l.piped.Load() >= n
}

// done counts a command sent above the threshold (either lane) and ends the epoch when it is
// full. (Modulo, not equality: an epoch that overshoots still ends.)
func (l *lanes) done() {
	if l.n.Add(1)%epochLen == 0 {
		l.next(time.Now())
	}
}

// next ends an epoch at now: it folds the epoch's time per command into its policy's and picks
// the next epoch's policy.
func (l *lanes) next(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cnt := l.n.Swap(0)
	start := l.start
	l.start = now
	l.every = cmp.Or(l.every, probeEvery)
	cur := 0
	if l.split.Load() {
		cur = 1
	}
	switch {
	case start.IsZero() || cnt <= 0:
		// The first epoch starts now.
	case l.settle:
		l.settle = false
	default:
		m := float64(now.Sub(start)) / float64(cnt)
		if l.mean[cur] == 0 {
			l.mean[cur] = m
		} else {
			l.mean[cur] += (m - l.mean[cur]) / 4
		}
		switch {
		case cur == l.pref:
			l.since++
		case l.mean[l.pref] != 0 && l.mean[cur] > l.mean[l.pref]*(1+margin):
			l.every, l.probing = min(2*l.every, probeMax), false // a probe that lost
		default:
			l.every, l.probing = probeEvery, false
		}
		// The preferred policy changes only for a clear gain: an epoch's mean moves with the rest
		// of the machine's load, and a policy chosen in a lull would otherwise be kept through
		// the busy spell after it.
		if o := 1 - l.pref; l.mean[o] != 0 && l.mean[o] < l.mean[l.pref]*(1-margin) {
			l.pref = o
			l.every = probeEvery
		}
	}

	want := l.pref
	switch {
	case l.mean[l.pref] != 0 && l.mean[1-l.pref] == 0, l.probing:
		want = 1 - l.pref // not measured yet (once the preferred is), or its probe's measured epoch comes next
	case l.since >= l.every:
		want, l.probing, l.since = 1-l.pref, true, 0 // its turn to be tried again
	}
	if want != cur {
		l.split.Store(want == 1)
		l.settle = true
		l.n.Add(epochLen - settleLen) // (a short epoch)
	}
}
