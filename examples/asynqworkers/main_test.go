package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs a small batch of tasks on three asynq servers against a real redis-server and
// checks the per-task lines and the summary: every task completed, no overlap, fences in order.
func TestRun(t *testing.T) {
	srv := redistest.Start(t)
	c := config{workers: 3, concurrency: 4, tasks: 40, keys: 4, addr: srv.Addr(),
		work: 2 * time.Millisecond, timeout: 10 * time.Second}
	var out bytes.Buffer
	ok, err := run(c, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !ok {
		t.Fatalf("run reported a failure:\n%s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	tasks := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "key=k") && strings.Contains(l, " fence=") {
			tasks++
		}
	}
	if tasks != c.tasks {
		t.Errorf("%d task lines, want %d:\n%s", tasks, c.tasks, out.String())
	}
	summary := lines[len(lines)-1]
	for _, want := range []string{"summary: tasks=40 completed=40 keys=4 overlaps=0 fence_out_of_order=0 ", " failures=0 "} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %q", summary, want)
		}
	}
}
