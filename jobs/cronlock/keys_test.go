package cronlock_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/cronlock"
)

// A tick's completion marker is the key docs/keys.md gives it (docs/keys_test.go, in the root
// module, cannot import this module): lockkit:cron:{@cron/JOB}:TICK, a string with a TTL.
func TestLocker_keysMatchDocs(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ev := fire(t, locktest.NewClient(t, rdb), tick, "report", func(context.Context) error { return nil })
	if ev.Outcome != cronlock.OutcomeRan {
		t.Fatalf("cronlock: %+v", ev)
	}
	locktest.DocumentedKey(t, rdb, "lockkit:cron:{@cron/JOB}:TICK", "string",
		regexp.MustCompile(`^lockkit:cron:\{@cron/report\}:[0-9]+$`))
}
