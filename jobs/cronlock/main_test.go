package cronlock_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/exactlyonce"
	"github.com/lockkit/lockkit/jobs/cronlock"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(childEnv); addr != "" {
		os.Exit(runChildReplica(addr))
	}
	locktest.VerifyTestMain(m)
}

// markerValue returns the value of a tick's completion marker ("ok" or "failed"), "" if absent.
func markerValue(t testing.TB, rdb redis.UniversalClient, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	rec, err := exactlyonce.Decode(v)
	if err != nil {
		t.Fatalf("marker %q: %v", v, err)
	}
	return rec.Payload
}

// newLocker returns a Locker over c, stopped when the test ends.
func newLocker(t testing.TB, c *core.Client, opts ...cronlock.Option) *cronlock.Locker {
	t.Helper()
	l, err := cronlock.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

// events records the events of a hook.
type events struct {
	mu  sync.Mutex
	evs []cronlock.Event
}

func (e *events) hook(ev cronlock.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) all() []cronlock.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]cronlock.Event(nil), e.evs...)
}

// last returns the latest event; it fails the test if there is none.
func (e *events) last(t testing.TB) cronlock.Event {
	t.Helper()
	all := e.all()
	if len(all) == 0 {
		t.Fatal("no event reported")
	}
	return all[len(all)-1]
}

// fixed returns a clock that always reads t.
func fixed(t time.Time) func() time.Time { return func() time.Time { return t } }

// mustParse parses a spec with seconds, as cron.WithSeconds does.
func mustParse(t testing.TB, spec string) cron.Schedule {
	t.Helper()
	s, err := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow |
		cron.Descriptor).Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stopCron stops c, waits for its running jobs to return, then stops l.
func stopCron(t testing.TB, c *cron.Cron, l *cronlock.Locker) {
	t.Helper()
	ctx := c.Stop()
	defer l.Stop()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("cron jobs did not return within 5s of Stop")
	}
}
