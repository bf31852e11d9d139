package core_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
	"github.com/redis/go-redis/v9"
)

// Every operation and every kind of hold works in FIPS 140-only mode (GODEBUG=fips140=only), where
// crypto/sha1 panics (issue #37): TestWorkload_everyOperation (locks, pipelined and Redlock too, a
// fair lock and permits handed to queued waiters, read and write holds, a LockSet, Inspect,
// ForceRelease, an election, httpmw) runs again in a child process in that mode against a real
// server. The script hashes and the waiters' token digests come from the server.
func TestFIPS140Only_workload(t *testing.T) {
	locktest.UnderFIPS140Only(t, "^TestWorkload_everyOperation$", 1)
}

// workTTL is every hold's TTL in TestWorkload_everyOperation: long enough that only a release ends a
// hold there.
const workTTL = 10 * time.Second

// TestWorkload_everyOperation runs every kind of hold and operation against one server: a lock
// (Acquire, TTL, Extend, re-entry, Release, ReleaseSet), the same over a client with WithPipelining
// and over Redlock (three databases of the server), a fair lock whose queued waiter is handed the
// lock on release (direct handoff), a read and a write hold, permits whose queued waiter is handed
// a permit, a LockSet, Inspect, ForceRelease, an election (Campaign, Leader, Resign) and httpmw's
// Idempotency and KeyLock. TestFIPS140Only_workload runs it again under GODEBUG=fips140=only.
func TestWorkload_everyOperation(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(db int) *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: db, DisableIdentity: true})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	rdb := client(0)
	handoffs := &grants{}
	locks := locktest.NewClient(t, rdb, core.WithHook(handoffs.hook()))
	piped := locktest.NewClient(t, rdb, core.WithPipelining(1))
	red, err := core.NewRedlock([]redis.UniversalClient{client(1), client(2), client(3)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = red.Close(context.Background()) })

	steps := []struct {
		name string
		fn   func() error
	}{
		{"lock", func() error { return lockLife(ctx, locks, "lock") }},
		{"pipelined lock", func() error { return lockLife(ctx, piped, "piped") }},
		{"redlock", func() error { return lockLife(ctx, red, "redlock") }},
		{"fair handoff", func() error { return handoff(ctx, locks, handoffs, "fair", core.Fair()) }},
		{"permit handoff", func() error { return handoff(ctx, locks, handoffs, "sem", core.Permits(1)) }},
		{"read and write", func() error { return readWrite(ctx, locks) }},
		{"lock set", func() error {
			s, err := locks.AcquireAll(ctx, []string{"{set}a", "{set}b"}, workTTL)
			if err != nil {
				return err
			}
			return s.Release(ctx)
		}},
		{"inspect and force release", func() error { return inspectForce(ctx, locks) }},
		{"election", func() error { return elect(ctx, locks, rdb) }},
		{"httpmw", func() error { return httpmwRequests(locks) }},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
}

// lockLife takes a lock, reads its TTL, extends it, re-enters it, releases both holds, and takes
// it again to release it with a value.
func lockLife(ctx context.Context, c *core.Client, name string) error {
	l, err := c.Acquire(ctx, name, workTTL)
	if err != nil {
		return err
	}
	if _, err := l.TTL(ctx); err != nil {
		return err
	}
	if err := l.Extend(ctx, workTTL); err != nil {
		return err
	}
	in, err := c.Acquire(l.Context(), name, workTTL)
	if err != nil {
		return err
	}
	if err := in.Release(ctx); err != nil {
		return err
	}
	if err := l.Release(ctx); err != nil {
		return err
	}
	if l, err = c.TryAcquire(ctx, name, workTTL); err != nil {
		return err
	}
	return l.ReleaseSet(ctx, l.Key()+":value", []byte("v"), workTTL)
}

// grants counts, per lock name, the acquire attempts that took a hold and those that did not: a
// waiter handed the hold by a release (direct handoff) takes it without an attempt.
type grants struct {
	mu             sync.Mutex
	taken, refused map[string]int
}

func (g *grants) hook() core.Hook {
	g.taken, g.refused = map[string]int{}, map[string]int{}
	return core.Hook{Attempt: func(_ context.Context, w core.WaitInfo) {
		g.mu.Lock()
		if w.Acquired {
			g.taken[w.Name]++
		} else {
			g.refused[w.Name]++
		}
		g.mu.Unlock()
	}}
}

func (g *grants) count(name string) (taken, refused int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.taken[name], g.refused[name]
}

// handoff holds name (a fair lock or a permit), queues a waiter behind the hold, releases, and
// checks that the waiter was handed the hold without taking it itself. The waiter parks after its
// second refused attempt (the first queues it in Redis, the second follows its subscription): it
// asks the server for its token's digest then, by which the release's grant names it.
func handoff(ctx context.Context, c *core.Client, g *grants, name string, kind core.AcquireOption) error {
	held, err := c.Acquire(ctx, name, workTTL, kind)
	if err != nil {
		return err
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, name, workTTL, kind)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := c.Inspect(ctx, name)
		if err != nil {
			return err
		}
		if _, refused := g.count(name); refused >= 2 && info.Queued+info.PermitsQueued > 0 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the waiter did not queue")
		}
		time.Sleep(5 * time.Millisecond) // (a poll with a deadline)
	}
	if err := held.Release(ctx); err != nil {
		return err
	}
	if err := <-got; err != nil {
		return fmt.Errorf("waiter: %w", err)
	}
	if n, _ := g.count(name); n != 1 {
		return fmt.Errorf("%d attempts took the hold, want 1 (the holder's): the waiter was not handed it", n)
	}
	return nil
}

// readWrite takes a write hold, then two read holds, of one name.
func readWrite(ctx context.Context, c *core.Client) error {
	w, err := c.Acquire(ctx, "rw", workTTL, core.Write())
	if err != nil {
		return err
	}
	if err := w.Release(ctx); err != nil {
		return err
	}
	r1, err := c.Acquire(ctx, "rw", workTTL, core.Read())
	if err != nil {
		return err
	}
	r2, err := c.Acquire(ctx, "rw", workTTL, core.Read())
	if err != nil {
		return err
	}
	return errors.Join(r1.Release(ctx), r2.Release(ctx))
}

// inspectForce inspects a held lock and force-releases it.
func inspectForce(ctx context.Context, c *core.Client) error {
	l, err := c.Acquire(ctx, "forced", workTTL)
	if err != nil {
		return err
	}
	info, err := c.Inspect(ctx, "forced")
	if err != nil {
		return err
	}
	if !info.Held || len(info.Holders) != 1 || info.Holders[0].Digest == "" {
		return fmt.Errorf("inspect: %+v", info)
	}
	ok, err := c.ForceRelease(ctx, "forced")
	if err != nil || !ok {
		return fmt.Errorf("force release: %v, %w", ok, err)
	}
	_ = l.Release(ctx) // (not held any more: an error that says so)
	return nil
}

// elect campaigns, reads the leader and resigns.
func elect(ctx context.Context, c *core.Client, rdb redis.UniversalClient) error {
	e, err := election.New(c, rdb, "leader")
	if err != nil {
		return err
	}
	t, err := e.Campaign(ctx, "me")
	if err != nil {
		return err
	}
	if ld, err := e.Leader(ctx); err != nil || ld.Value != "me" {
		return fmt.Errorf("leader %+v, %w", ld, err)
	}
	return t.Resign(ctx)
}

// httpmwRequests sends a request through Idempotency twice (the second is replayed) and one through
// KeyLock.
func httpmwRequests(c *core.Client) error {
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	})
	idem := httpmw.Idempotency(c, httpmw.RequireKey())(h)
	key := "key-" + strconv.FormatInt(time.Now().UnixNano(), 36) // (a new one for each run on a server)
	for range 2 {
		req := httptest.NewRequest("POST", "/orders", nil)
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		idem.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			return fmt.Errorf("idempotency: status %d", rec.Code)
		}
	}
	if runs.Load() != 1 {
		return fmt.Errorf("idempotency: the handler ran %d times", runs.Load())
	}
	mux := http.NewServeMux()
	mux.Handle("PUT /accounts/{id}", httpmw.KeyLock(c, httpmw.ByPathValue("id"))(h))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("PUT", "/accounts/42", nil))
	if rec.Code != http.StatusCreated {
		return fmt.Errorf("keylock: status %d", rec.Code)
	}
	return nil
}
