// Tests that run what the docs in this directory state, reading it from the docs themselves.
package docs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
	"github.com/redis/go-redis/v9"
)

// keyRow is a row of the key table of docs/keys.md.
type keyRow struct {
	key string         // the key column, as written, without its backticks: lockkit:{NAME}:fence
	re  *regexp.Regexp // the key with its placeholders as patterns
	typ string         // the Redis TYPE the type column names; "" for a pub/sub channel
}

// placeholders are the words of the key column that stand for a part of a key.
var placeholders = map[string]string{
	"NAME": `[^{}]+`, "JOB": `[^{}]+`, "HASH": `[0-9a-f]{64}`, "TICK": `[0-9]+`, "MS": `[0-9]+`, "FENCE": `[0-9]+`,
	"TOKEN": `[0-9a-f]{32}`,
}

// elsewhere are the rows whose keys only an adapter of a module of its own writes: that module's
// tests check them against this table (the root module cannot import it).
var elsewhere = map[string]string{
	"lockkit:idem:{@grpc-idem/HASH}":  "middleware/grpcmw: TestIdempotency_keysMatchDocs",
	"lockkit:cron:{@cron/JOB}:TICK":   "jobs/cronlock: TestLocker_keysMatchDocs",
	"lockkit:gocron:{@gocron/JOB}:MS": "jobs/gocronlock: TestLocker_keysMatchDocs",
}

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) { locktest.VerifyTestMain(m) }

// types maps the type column's first words to what Redis's TYPE answers.
var types = []struct{ doc, redisType string }{
	{"string", "string"}, {"sorted set", "zset"}, {"hash", "hash"}, {"list", "list"}, {"pub/sub channel", ""},
}

// keyTable reads the table of docs/keys.md whose header starts with "key | type".
func keyTable(t *testing.T) []keyRow {
	t.Helper()
	word := regexp.MustCompile(`[A-Z]+`)
	for _, tab := range locktest.Tables(locktest.Doc(t, "docs/keys.md")) {
		if len(tab.Header) < 2 || tab.Header[0] != "key" || tab.Header[1] != "type" {
			continue
		}
		var rows []keyRow
		for _, r := range tab.Rows {
			spans := locktest.CodeSpans(r[0])
			if len(spans) != 1 {
				t.Fatalf("docs/keys.md: the key column of %q must be one key in backticks", r[0])
			}
			key, pattern, last := spans[0], "^", 0
			for _, loc := range word.FindAllStringIndex(key, -1) {
				p, ok := placeholders[key[loc[0]:loc[1]]]
				if !ok {
					t.Fatalf("docs/keys.md: unknown placeholder %s in %s", key[loc[0]:loc[1]], key)
				}
				pattern += regexp.QuoteMeta(key[last:loc[0]]) + p
				last = loc[1]
			}
			row := keyRow{key: key, re: regexp.MustCompile(pattern + regexp.QuoteMeta(key[last:]) + "$"), typ: "?"}
			for _, ty := range types {
				if strings.HasPrefix(r[1], ty.doc) {
					row.typ = ty.redisType
					break
				}
			}
			if row.typ == "?" {
				t.Fatalf("docs/keys.md: %s: unknown type %q", row.key, r[1])
			}
			rows = append(rows, row)
		}
		return rows
	}
	t.Fatal("docs/keys.md has no table with the columns key | type")
	return nil
}

// keyCheck checks the keys of a Redis against the key table.
type keyCheck struct {
	t    *testing.T
	rdb  *redis.Client
	rows []keyRow
	mine []string     // keys the workload writes itself, outside lockkit's schema
	seen map[int]bool // rows matched by a key
}

// scan checks every key the server holds now: it matches exactly one row, has the row's type, and
// expires. It records the rows matched.
func (kc *keyCheck) scan() {
	ctx := context.Background()
	keys, err := kc.rdb.Keys(ctx, "*").Result()
	if err != nil {
		kc.t.Fatal(err)
	}
	for _, k := range keys {
		if slices.Contains(kc.mine, k) {
			continue
		}
		var match []int
		for i, r := range kc.rows {
			if r.re.MatchString(k) {
				match = append(match, i)
			}
		}
		if len(match) != 1 {
			kc.t.Errorf("key %q matches %d rows of docs/keys.md, want 1", k, len(match))
			continue
		}
		r := kc.rows[match[0]]
		typ, err := kc.rdb.Type(ctx, k).Result()
		if err != nil {
			kc.t.Fatal(err)
		}
		pttl, err := kc.rdb.PTTL(ctx, k).Result()
		if err != nil {
			kc.t.Fatal(err)
		}
		switch {
		case typ == "none" || pttl == -2: // (go-redis's PTTL answer for a missing key)
			continue // gone since the scan, or between TYPE and PTTL
		case typ != r.typ:
			kc.t.Errorf("key %q is a %s; docs/keys.md's row %s says %q", k, typ, r.key, r.typ)
		case pttl <= 0:
			kc.t.Errorf("key %q (row %s) does not expire: PTTL %v", k, r.key, pttl)
		}
		kc.seen[match[0]] = true
	}
}

// until scans until every row of want has been matched, for at most 5 s; it fails the test with
// the rows still unmatched.
func (kc *keyCheck) until(want ...string) {
	kc.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		kc.scan()
		var missing []string
		for _, w := range want {
			i := slices.IndexFunc(kc.rows, func(r keyRow) bool { return r.key == w })
			if i < 0 {
				kc.t.Fatalf("docs/keys.md has no row %s", w)
			}
			if !kc.seen[i] {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			kc.t.Fatalf("no key matched %v after 5s", missing)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// queued counts, per lock name, the failed acquire attempts of waiters ("NAME permits" for a
// semaphore's).
type queued struct {
	mu sync.Mutex
	n  map[string]int
}

func (q *queued) hook() core.Option {
	return core.WithHook(core.Hook{Attempt: func(_ context.Context, w core.WaitInfo) {
		if !w.Acquired && w.Err == nil {
			k := w.Name
			if w.Limit > 0 {
				k += " permits"
			}
			q.mu.Lock()
			q.n[k]++
			q.mu.Unlock()
		}
	}})
}

func (q *queued) atLeast(k string, n int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n[k] >= n
}

// A workload that touches every feature leaves only keys that docs/keys.md's key table names,
// each of the type it says and with a TTL; and every row of the table (but the channels) names a
// key the workload left: locks (held, re-entered, free), a fair queue with a waiter that refreshed
// its place, a semaphore with a permit held, a queued waiter, a release receipt and a give-back's
// receipt, a read-write lock likewise (a read held, a write queued), an election and httpmw's
// idempotency record (the rows of adapters in modules of their own are checked by their tests, see
// elsewhere).
func TestKeys_docTable(t *testing.T) {
	rows := keyTable(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	kc := &keyCheck{t: t, rdb: rdb, rows: rows, mine: []string{"app:done:{job}"}, seen: map[int]bool{}}
	ctx := context.Background()
	q := &queued{n: map[string]int{}}
	c := locktest.NewClient(t, rdb, q.hook(), core.WithFairWaiterTimeout(300*time.Millisecond))
	acquire := func(name string, opts ...core.AcquireOption) *core.Lock {
		t.Helper()
		l, err := c.Acquire(ctx, name, 10*time.Second, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	var wg sync.WaitGroup
	wctx, cancel := context.WithCancel(ctx)
	defer wg.Wait()
	defer cancel()
	waiters := make(chan error, 3)
	wait := func(name string, opts ...core.AcquireOption) {
		wg.Go(func() {
			l, err := c.Acquire(wctx, name, 10*time.Second, append(opts, core.WithWait(10*time.Second))...)
			if err == nil {
				err = l.Release(ctx)
			}
			waiters <- err
		})
	}

	// Held: a lock re-entered, a fair lock and a semaphore with a waiter each, an election.
	l := acquire("lock")
	in := acquire("lock", core.WithOwner(l.Token()))
	f := acquire("fair", core.Fair())
	wait("fair", core.Fair())
	p := acquire("pool", core.Permits(1))
	wait("pool", core.Permits(1))
	r := acquire("doc", core.Read())
	wait("doc", core.Write())
	locktest.Eventually(t, 5*time.Second, "the waiters queued, the fair one refreshed", func() bool {
		return q.atLeast("fair", 2) && q.atLeast("pool permits", 1) && q.atLeast("doc", 1)
	})
	e, err := election.New(c, rdb, "leader")
	if err != nil {
		t.Fatal(err)
	}
	term, err := e.Campaign(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	g := acquire("job", core.WithGuard("app:done:{job}"))
	giveBack(t, srv, "given", core.Permits(1))
	giveBack(t, srv, "rgiven", core.Read())
	kc.until("lockkit:{NAME}", "lockkit:{NAME}:queue", "lockkit:{NAME}:queue:deadlines",
		"lockkit:{NAME}:permits", "lockkit:{NAME}:permits:limits", "lockkit:{NAME}:permits:fences",
		"lockkit:{NAME}:permits:queue", "lockkit:{NAME}:permits:queue:deadlines",
		"lockkit:{NAME}:permits:receipt:t:TOKEN", "lockkit:{NAME}:rw", "lockkit:{NAME}:rw:limits",
		"lockkit:{NAME}:rw:fences", "lockkit:{NAME}:rw:queue",
		"lockkit:{NAME}:rw:queue:deadlines", "lockkit:{NAME}:rw:receipt:t:TOKEN")

	// A record of the exactly-once layer, through httpmw.
	httpRecord(t, c)

	// Released: handed to the waiters, who release in turn; a guarded value written.
	for _, h := range []*core.Lock{in, l, f, p, r} {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := <-waiters; err != nil {
			t.Fatal(err)
		}
	}
	if err := g.ReleaseSet(ctx, "app:done:{job}", []byte("ok"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	kc.until("lockkit:{NAME}:permits:receipt:FENCE", "lockkit:{NAME}:rw:receipt:FENCE", "lockkit:idem:{@http-idem/HASH}")
	for i, r := range rows {
		if _, ok := elsewhere[r.key]; r.typ != "" && !kc.seen[i] && !ok {
			t.Errorf("docs/keys.md's row %s matched no key of the workload", r.key)
		}
	}
	t.Logf("%d rows of docs/keys.md, %d keys' rows matched", len(rows), len(kc.seen))
}

// giveBack makes a permit (or, with core.Read, read-write) acquisition whose reply is lost (its
// context ends while the reply is on its way), so that the client gives it back in the background.
func giveBack(t *testing.T, srv *redistest.Server, name string, side core.AcquireOption) {
	t.Helper()
	proxy := srv.StartDelayProxy(t, 300*time.Millisecond)
	o := proxy.Options()
	o.ContextTimeoutEnabled = true // the call's deadline cuts the wait for its reply
	slow := redis.NewClient(o)
	t.Cleanup(func() { _ = slow.Close() })
	// Two connections ready, so that the call sends at once: the Client's eviction check sends
	// INFO beside its first acquisition, and a connection dialled, or first used (go-redis sends
	// HELLO then), through the proxy would take longer than the call's deadline: no command sent,
	// nothing to give back, no receipt (CI failed so once, when the acquisition drew the
	// connection that MinIdleConns had dialled but nothing had used).
	locktest.WarmConns(t, slow, 2)
	c := locktest.NewClient(t, slow)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// TryAcquire: a waiting call that fails also leaves the queue (dequeue), which drops a lease its
	// attempt took before the give-back finds it, and then no give-back receipt is written.
	if _, err := c.TryAcquire(ctx, name, 10*time.Second, side); err == nil {
		t.Fatal("acquired through a proxy slower than the call's deadline")
	}
}

// httpRecord stores a response through httpmw's Idempotency.
func httpRecord(t *testing.T, c *core.Client) {
	h := httpmw.Idempotency(c)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("httpmw: %d %s", rec.Code, rec.Body)
	}
}
