package pipe

import (
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
)

// drive runs epochs of commands whose wall time per command depends on the policy in force,
// on a clock of its own, and returns the share of epochs run split.
func drive(l *lanes, epochs int, piped, split time.Duration) float64 {
	now := time.Unix(1, 0)
	l.next(now) // (starts the first epoch)
	n := 0
	for range epochs {
		d := piped
		if l.split.Load() {
			n++
			d = split
		}
		now = now.Add(epochLen * d)
		l.n.Store(epochLen)
		l.next(now)
	}
	return float64(n) / float64(epochs)
}

// The policy under which commands are done faster wins most epochs, whichever it is, and the
// choice follows a change of conditions (a machine that becomes busy or idle).
func TestLanes_fasterPolicyWins(t *testing.T) {
	var l lanes
	if got := drive(&l, 120, 300*time.Microsecond, 150*time.Microsecond); got < 0.75 {
		t.Fatalf("split twice as fast: ran split %.0f%% of epochs, want most", got*100)
	}
	if got := drive(&l, 120, 300*time.Microsecond, 600*time.Microsecond); got > 0.3 {
		t.Fatalf("then split twice as slow: ran split %.0f%% of epochs, want few", got*100)
	}
	var m lanes
	if got := drive(&m, 120, 300*time.Microsecond, 600*time.Microsecond); got > 0.25 {
		t.Fatalf("split twice as slow from the start: ran split %.0f%% of epochs, want few", got*100)
	}
}

// Split: at most half of the commands in flight are in the pipeliner; the others go straight out.
// Not split: all of them are.
func TestLanes_splitKeepsHalfInThePipeliner(t *testing.T) {
	var l lanes
	l.piped.Store(8)
	if l.splitNow(16) {
		t.Fatal("not split: a command went straight out")
	}
	l.split.Store(true)
	if !l.splitNow(16) || !l.splitNow(15) {
		t.Fatal("split, 8 of 16 in the pipeliner: the next one should go straight out")
	}
	if l.splitNow(17) {
		t.Fatal("split, 8 of 17 in the pipeliner: the next one should be piped")
	}
}

// A difference within the margin (epochs' means move with the machine's load) does not move the
// choice off piping everything: split runs only in its probes.
func TestLanes_smallDifferenceKeepsPiped(t *testing.T) {
	var l lanes
	if got := drive(&l, 240, 300*time.Microsecond, 285*time.Microsecond); got > 0.15 {
		t.Fatalf("split 5%% faster: ran split %.0f%% of epochs, want only its probes", got*100)
	}
}

// Split, concurrent callers above the threshold use both lanes, and every caller gets its own
// reply.
func TestSender_split_usesBothLanes(t *testing.T) {
	srv := redistest.Start(t)
	px := srv.StartDelayProxy(t, 2*time.Millisecond)
	rdb := client(t, px.Options())
	s := New(rdb, 2)
	s.lanes.split.Store(true) // (640 commands: no epoch ends, the policy stays)
	setGetCallers(t, s, 32, 10)
	if d, p := s.direct.Load(), s.piped.Load(); d == 0 || p == 0 {
		t.Fatalf("direct %d, piped %d: want both lanes used", d, p)
	}
}

// Probes that keep losing come less and less often (down to one in probeMax epochs), and a change
// of conditions is still found by the next probe.
func TestLanes_losingProbesBackOff(t *testing.T) {
	var l lanes
	if got := drive(&l, 2000, 100*time.Microsecond, 300*time.Microsecond); got > 0.03 {
		t.Fatalf("split 3× slower: ran split %.1f%% of epochs, want probes backed off (≤ 3%%)", got*100)
	}
	if l.every != probeMax {
		t.Fatalf("probe interval %d after 2000 losing epochs, want %d", l.every, probeMax)
	}
	if got := drive(&l, 2*probeMax, 300*time.Microsecond, 100*time.Microsecond); got < 0.4 {
		t.Fatalf("then split 3× faster: ran split %.0f%% of %d epochs, want it found", got*100, 2*probeMax)
	}
}

// The first probe comes once piping everything has been measured, and is judged against it.
func TestLanes_firstProbeAfterPipedMeasured(t *testing.T) {
	var l lanes
	drive(&l, 1, 100*time.Microsecond, 200*time.Microsecond)
	if l.mean[0] == 0 || !l.split.Load() {
		t.Fatalf("after one epoch: piped mean %v, split %v: want piped measured, then split tried", l.mean[0], l.split.Load())
	}
	drive(&l, 3, 100*time.Microsecond, 200*time.Microsecond) // (settling, measured, back)
	if l.mean[1] == 0 || l.split.Load() || l.every != 2*probeEvery {
		t.Fatalf("after the first probe: split mean %v, split %v, interval %d: want measured, lost once, back to piped", l.mean[1], l.split.Load(), l.every)
	}
}
