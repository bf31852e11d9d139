package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs three skewed replicas for 3 s against a real redis-server and checks that each
// tick ran exactly once (run fails otherwise) and that the output has the tick lines and summary.
func TestRun(t *testing.T) {
	srv := redistest.Start(t)
	var out bytes.Buffer
	if err := run(&out, 3, 3*time.Second, srv.Addr(), 300*time.Millisecond); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"replica 1: clock skew -300ms", "replica 3: clock skew 300ms"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	ticks := regexp.MustCompile(`(?m)^tick=\S+ replica=[1-3]$`).FindAllString(s, -1)
	m := regexp.MustCompile(`(?m)^summary: ticks=(\d+) runs=(\d+) duplicates=0 skipped_ticks=0 `).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no clean summary line:\n%s", s)
	}
	if m[1] != m[2] || m[1] == "0" || m[1] == "1" {
		t.Errorf("summary ticks=%s runs=%s, want equal and at least 2 in 3 s:\n%s", m[1], m[2], s)
	}
	if got := len(ticks); m[2] != strconv.Itoa(got) {
		t.Errorf("%d tick lines, summary says runs=%s", got, m[2])
	}
}
