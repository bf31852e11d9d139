package main_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// ls skips keys under the prefix that are not lockkit locks, with one warning each on stderr, and
// lists the locks (#27: it exited 1, "unexpected inspect reply", and listed nothing).
func TestLs_skipsKeysThatAreNotLocks(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	acquire(t, locktest.NewClient(t, rdb), ctx, "real")
	notLocks := map[string]string{
		"lockkit:{foo}":   "its value is not a lock's", // somebody's key under the prefix
		"lockkit:{a}:b}":  "its value is not a lock's", // its "name" a}:b is a valid name
		"lockkit:{@bad}":  "its name is not a lock name",
		"lockkit:{}":      "its name is not a lock name",
		"lockkit:{x\x00}": "its value is not a lock's",
	}
	for k := range notLocks {
		rdb.Set(ctx, k, "hand-written", time.Hour)
	}
	s := newSession(t, bin, "REDIS_URL=redis://"+srv.Addr())
	for _, tc := range []struct {
		args []string
		rows func(out string) []string
	}{
		{[]string{"ls"}, func(out string) []string { return strings.Split(strings.TrimSpace(out), "\n")[1:] }},
		{[]string{"ls", "--json"}, func(out string) []string {
			var names []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				var o struct{ Name string }
				if err := json.Unmarshal([]byte(l), &o); err != nil {
					t.Fatalf("ls --json: %v: %q", err, l)
				}
				names = append(names, o.Name)
			}
			return names
		}},
	} {
		out, stderr, code := s.run3("", tc.args...)
		if code != 0 {
			t.Fatalf("lockkit %v: exit %d, want 0:\n%s%s", tc.args, code, out, stderr)
		}
		if rows := tc.rows(out); len(rows) != 1 || !strings.HasPrefix(rows[0], "real") {
			t.Errorf("lockkit %v listed %q, want the lock real only", tc.args, rows)
		}
		warnings := strings.Split(strings.TrimSpace(stderr), "\n")
		if len(warnings) != len(notLocks) {
			t.Errorf("lockkit %v: %d warnings, want one per key that is not a lock (%d):\n%s", tc.args, len(warnings), len(notLocks), stderr)
		}
		for k, why := range notLocks {
			want := regexp.QuoteMeta(`lockkit ls: skipped "`+strings.ReplaceAll(k, "\x00", `\x00`)+`": not a lockkit lock (`+why+")") + "$"
			if !regexp.MustCompile("(?m)^" + want).MatchString(stderr) {
				t.Errorf("lockkit %v: no warning %s in:\n%s", tc.args, want, stderr)
			}
		}
	}
}

// QUEUED (ls) and queued/permits_queued (--json) count the waiters queued in Redis: a lock's fair
// waiters only (a waiter that is not fair waits in its process), every permit waiter of a
// semaphore (fair or not), as docs/troubleshooting.md says. WAITING (ls), subscribed_processes
// (--json) and inspect's "waiting processes" count the processes waiting, fair or not (#47: a
// plain Acquire blocked in another process showed QUEUED 0, "fair waiters 0", and nothing else).
func TestLs_queuedCountsWaitersQueuedInRedis(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	s := newSession(t, bin, "REDIS_URL=redis://"+srv.Addr())
	for _, tc := range []struct {
		name   string
		opts   []core.AcquireOption // of the holder and of the waiter
		fair   bool                 // the waiter's
		queued int
	}{
		{"lock, fair waiter", nil, true, 1},
		{"lock, waiter not fair", nil, false, 0},
		{"semaphore, fair waiter", []core.AcquireOption{core.Permits(1)}, true, 1},
		{"semaphore, waiter not fair", []core.AcquireOption{core.Permits(1)}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			holder, waiter := locktest.NewClient(t, rdb), locktest.NewClient(t, rdb)
			acquire(t, holder, ctx, name, tc.opts...)
			wopts := tc.opts
			if tc.fair {
				wopts = append(wopts, core.Fair())
			}
			wctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = waiter.Acquire(wctx, name, time.Minute, wopts...)
			}()
			defer func() { stop(); <-done }()
			channel := locktest.Key(name, "released")
			if len(tc.opts) > 0 {
				channel = locktest.Key(name, "permits", "released")
			}
			locktest.Eventually(t, 5*time.Second, "the waiter waiting", func() bool {
				n, err := rdb.PubSubNumSub(ctx, channel).Result()
				info, ierr := holder.Inspect(ctx, name)
				return err == nil && ierr == nil && n[channel] == 1 && info.Queued+info.PermitsQueued == tc.queued
			})
			out, code := s.run("", "ls", name)
			rows := strings.Split(strings.TrimSpace(out), "\n")
			if cols := columns.Split(rows[len(rows)-1], -1); code != 0 || len(rows) != 2 || cols[6] != strconv.Itoa(tc.queued) || len(cols) != 8 || cols[7] != "1" {
				t.Errorf("lockkit ls %s: exit %d, QUEUED want %d, WAITING 1:\n%s", name, code, tc.queued, out)
			}
			out, _ = s.run("", "ls", "--json", name)
			var o struct {
				Queued        int  `json:"queued"`
				PermitsQueued int  `json:"permits_queued"`
				Subscribed    *int `json:"subscribed_processes"`
			}
			if err := json.Unmarshal([]byte(out), &o); err != nil || o.Queued+o.PermitsQueued != tc.queued || o.Subscribed == nil || *o.Subscribed != 1 {
				t.Errorf("lockkit ls --json %s: %v, want %d queued, 1 subscribed process:\n%s", name, err, tc.queued, out)
			}
			out, _ = s.run("", "inspect", name)
			if !regexp.MustCompile(`(?m)^waiting processes +1 `).MatchString(out) {
				t.Errorf("lockkit inspect %s: want \"waiting processes 1\":\n%s", name, out)
			}
		})
	}
}
