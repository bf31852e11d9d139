package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/pgtest"
	"github.com/lockkit/lockkit/internal/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wantLines checks that out has every line of want, in order.
func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	rest := out
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("output lacks %q (in order):\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
}

// TestRun_redis plays the scene against a real redis-server: B's write is accepted, the resumed
// A's write is rejected by its stale fence, and A's lock context reports the loss.
func TestRun_redis(t *testing.T) {
	srv := redistest.Start(t)
	var out bytes.Buffer
	if err := run(&out, srv.Addr(), "", 200*time.Millisecond); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wantLines(t, out.String(), "A holds the lock, fence ", "B holds the lock, fence ",
		"B writes to redis    accepted", "(held: true)",
		"A writes to redis    rejected: ", `A's lock context: lockkit: lock "account" lost`)
	if strings.Contains(out.String(), "postgres") {
		t.Errorf("wrote to PostgreSQL without -pg:\n%s", out.String())
	}
}

// TestRun_postgres adds the PostgreSQL row (a real server from pgtest) as a second resource.
func TestRun_postgres(t *testing.T) {
	srv := redistest.Start(t)
	pg := pgtest.Start(t)
	var out bytes.Buffer
	if err := run(&out, srv.Addr(), pg.DSN(), 200*time.Millisecond); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wantLines(t, out.String(), "B writes to redis    accepted", "B writes to postgres accepted",
		"A writes to redis    rejected: ", "A writes to postgres rejected: ", "A's lock context: ")
}
