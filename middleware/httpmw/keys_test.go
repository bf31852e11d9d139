package httpmw_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// transferKeys locks both accounts of POST /transfers/{from}/{to}.
func transferKeys() httpmw.Option {
	return httpmw.WithKeys(httpmw.Keys(httpmw.ByPathValue("from"), httpmw.ByPathValue("to")))
}

// bank is a transfer handler that checks, inside, that it holds both accounts' locks in Redis and
// that no other request is inside for either account.
type bank struct {
	t      testing.TB
	srv    *redistest.Server
	mu     sync.Mutex
	inside map[string]bool // accounts with a request inside the handler
	runs   atomic.Int64
	fail   atomic.Value // the first error seen inside
}

func newBank(t testing.TB, srv *redistest.Server) *bank {
	return &bank{t: t, srv: srv, inside: map[string]bool{}}
}

func (b *bank) enter(accounts ...string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range accounts {
		if b.inside[a] {
			return fmt.Errorf("two requests inside for account %s", a)
		}
	}
	for _, a := range accounts {
		b.inside[a] = true
	}
	return nil
}

func (b *bank) leave(accounts ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range accounts {
		delete(b.inside, a)
	}
}

func (b *bank) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	from, to := r.PathValue("from"), r.PathValue("to")
	err := b.enter(from, to)
	if err == nil {
		defer b.leave(from, to)
		rdb := b.srv.Client(b.t)
		for _, a := range []string{from, to} {
			if !locktest.Held(b.t, rdb, "lockkit:{@http/"+a+"}") {
				err = fmt.Errorf("account %s is not locked in Redis", a)
			}
		}
		if r.Context().Err() != nil {
			err = errors.New("the set's context ended while the handler ran")
		}
	}
	if err != nil {
		b.fail.CompareAndSwap(nil, err)
		http.Error(w, err.Error(), 500)
		return
	}
	b.runs.Add(1)
	time.Sleep(time.Millisecond) // the work: an overlapping request would be seen by enter
}

func (b *bank) err() error {
	err, _ := b.fail.Load().(error)
	return err
}

// transferAPI serves h on POST /transfers/{from}/{to} behind KeyLock with WithKeys, and
// h on PUT /accounts/{id} behind KeyLock of one key, sharing the namespace.
func transferAPI(t testing.TB, locks *core.Client, h http.Handler, opts ...httpmw.Option) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST /transfers/{from}/{to}", httpmw.KeyLock(locks, nil, append(opts, transferKeys())...)(h))
	mux.Handle("PUT /accounts/{id}", httpmw.KeyLock(locks, httpmw.ByPathValue("id"), opts...)(h))
	return serve(t, mux).URL
}

// Transfers in both directions between two accounts, and against a third, sent at once over two
// replicas: every one runs, holding both of its accounts (in Redis, inside the handler), never
// while another request is inside for either account, and none deadlocks.
func TestKeyLock_withKeys_transfersInOppositeDirectionsNeverDeadlock(t *testing.T) {
	srv := redistest.Start(t)
	b := newBank(t, srv)
	var urls []string
	for range 2 {
		urls = append(urls, transferAPI(t, locktest.NewClient(t, srv.Client(t)), b, httpmw.WithWait(time.Minute)))
	}
	paths := []string{"/transfers/A/B", "/transfers/B/A", "/transfers/B/C", "/transfers/C/A", "/transfers/A/C"}
	const n = 40
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		go func() {
			<-start
			r, err := request("POST", urls[i%2]+paths[i%len(paths)], "", "")
			if err == nil && r.status != 200 {
				err = fmt.Errorf("%s: status %d: %s", paths[i%len(paths)], r.status, r.body)
			}
			errs <- err
		}()
	}
	close(start)
	deadline := time.After(60 * time.Second)
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("transfers did not finish: deadlocked")
		}
	}
	if err := b.err(); err != nil {
		t.Fatal(err)
	}
	if b.runs.Load() != n {
		t.Fatalf("%d transfers ran, want %d", b.runs.Load(), n)
	}
}

// A transfer whose accounts are partly held: without a wait it is refused at once with 409 and
// Retry-After, taking nothing (the free account stays free); with a wait it waits, holding
// nothing, until the held account is released, then runs.
func TestKeyLock_withKeys_partlyHeld(t *testing.T) {
	srv, locks := setup(t)
	b := newBank(t, srv)
	rdb := srv.Client(t)
	held, err := locks.Acquire(context.Background(), "B", 10*time.Second, core.InNamespace("http"))
	if err != nil {
		t.Fatal(err)
	}
	refusing := transferAPI(t, locks, b)
	if r := send(t, "POST", refusing+"/transfers/X/Y", "", ""); r.status != 200 { // loads the scripts
		t.Fatalf("transfer X to Y: %+v", r)
	}
	srv.ResetStats(t)
	r := send(t, "POST", refusing+"/transfers/A/B", "", "")
	wantProblem(t, r, 409, "resource-locked")
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 10 {
		t.Fatalf("Retry-After %q, want the held account's TTL", r.header.Get("Retry-After"))
	}
	if n := roundTrips(t, srv); n != 1 {
		t.Fatalf("refusing a partly held set took %d round trips, want 1", n)
	}
	if locktest.Held(t, rdb, locktest.Key("@http/A")) {
		t.Fatal("the refused transfer left account A locked")
	}

	waiting := transferAPI(t, locks, b, httpmw.WithWait(30*time.Second))
	done := make(chan response, 1)
	go func() { r, _ := request("POST", waiting+"/transfers/A/B", "", ""); done <- r }()
	locktest.Eventually(t, 5*time.Second, "the transfer to wait for account B", func() bool {
		return fmt.Sprint(srv.Do(t, "PUBSUB", "CHANNELS", "*{@http/B}*")) != "[]"
	})
	if locktest.Held(t, rdb, locktest.Key("@http/A")) {
		t.Fatal("a waiting transfer holds account A")
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.status != 200 || b.runs.Load() != 2 {
		t.Fatalf("waiting transfer: %+v, runs %d, handler error %v", r, b.runs.Load(), b.err())
	}
	for _, a := range []string{"A", "B"} {
		if locktest.Held(t, rdb, "lockkit:{@http/"+a+"}") {
			t.Fatalf("account %s still locked after the transfer", a)
		}
	}
}

// The keys of a set are deduplicated and empty ones left out; one key left is a plain lock; none
// is no lock; an uncontended set costs two round trips on one server, as one key does; every
// lock stays in KeyLock's namespace whatever the keys spell.
func TestKeyLock_withKeys_keys(t *testing.T) {
	srv, locks := setup(t)
	rdb := srv.Client(t)
	var got [][]string // per request: the locks held in KeyLock's namespace while the handler ran
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var held []string
		for _, k := range r.URL.Query()["k"] {
			for _, name := range []string{"@http/" + k, "@http/" + strings.TrimPrefix(k, "@")} {
				if locktest.Held(t, rdb, locktest.Key(name)) && !slices.Contains(held, name) {
					held = append(held, name)
				}
			}
		}
		if _, ok := core.FromContext(r.Context()); ok != (len(held) > 0) {
			held = append(held, "core.FromContext disagrees")
		}
		if set, ok := core.SetFromContext(r.Context()); ok != (len(held) > 1) || ok && len(set.Locks()) != len(held) {
			held = append(held, "core.SetFromContext disagrees")
		}
		got = append(got, held)
	})
	keys := httpmw.WithKeys(func(r *http.Request) ([]string, error) {
		q := r.URL.Query()
		if q.Has("bad") {
			return nil, errors.New("no such account")
		}
		return q["k"], nil
	})
	url := serve(t, httpmw.KeyLock(locks, nil, keys)(h)).URL
	send(t, "PUT", url+"/?k=x&k=y", "", "") // loads the scripts of sets
	send(t, "PUT", url+"/?k=z", "", "")     // and of one lock
	srv.ResetStats(t)
	send(t, "PUT", url+"/?k=a&k=b", "", "")
	if n := roundTrips(t, srv); n != 2 {
		t.Fatalf("uncontended set of two: %d round trips, want 2", n)
	}
	srv.ResetStats(t)
	send(t, "PUT", url+"/?k=a&k=a&k=", "", "")
	if n := roundTrips(t, srv); n != 2 {
		t.Fatalf("a set of one key: %d round trips, want 2", n)
	}
	send(t, "PUT", url+"/?k=", "", "")
	send(t, "PUT", url+"/?k=cron%2Fbilling&k=%40cron%2Fbilling", "", "")
	want := "[[@http/x @http/y] [@http/z] [@http/a @http/b] [@http/a] [] [@http/cron/billing @http/@cron/billing]]"
	if fmt.Sprint(got) != want {
		t.Fatalf("locks held while the handler ran: %v, want %s", got, want)
	}
	wantProblem(t, send(t, "PUT", url+"/?bad=1", "", ""), 400, "lock-key-invalid")
	many := url + "/?k=0"
	for i := 1; i <= 100; i++ {
		many += "&k=" + strconv.Itoa(i)
	}
	wantProblem(t, send(t, "PUT", many, "", ""), 400, "lock-key-invalid")
	if len(got) != 6 {
		t.Fatalf("the handler ran for invalid keys: %v", got)
	}
}

// A set whose lock is lost while the handler runs cancels the handler's context.
func TestKeyLock_withKeys_lostCancelsTheHandler(t *testing.T) {
	srv, locks := setup(t)
	inside := make(chan struct{})
	cause := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inside)
		<-r.Context().Done()
		cause <- context.Cause(r.Context())
	})
	url := serve(t, withPattern("POST /transfers/{from}/{to}",
		httpmw.KeyLock(locks, nil, transferKeys(), httpmw.WithTTL(300*time.Millisecond))(h))).URL
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		_, _ = request("POST", url+"/transfers/A/B", "", "")
	}()
	defer func() { <-finished }()
	<-inside
	srv.Do(t, "DEL", locktest.Key("@http/B"))
	select {
	case err := <-cause:
		if !errors.Is(err, core.ErrLost) {
			t.Fatalf("the handler's context ended with %v, want a loss", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context was not cancelled when a lock of the set was lost")
	}
}

// withPattern serves h on a ServeMux route, so that path values are set.
func withPattern(pattern string, h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(pattern, h)
	return mux
}

func TestKeyLock_withKeys_invalid(t *testing.T) {
	_, locks := setup(t)
	key := httpmw.ByPathValue("id")
	for name, build := range map[string]func(){
		"key and keys":   func() { httpmw.KeyLock(locks, key, transferKeys()) },
		"no key":         func() { httpmw.KeyLock(locks, nil) },
		"nil keys":       func() { httpmw.KeyLock(locks, nil, httpmw.WithKeys(nil)) },
		"keys and limit": func() { httpmw.KeyLock(locks, nil, transferKeys(), httpmw.WithLimit(2)) },
		"nil in Keys":    func() { httpmw.Keys(key, nil) },
		"idempotency":    func() { httpmw.Idempotency(locks, transferKeys()) },
	} {
		func() {
			defer func() {
				if err, _ := recover().(error); !errors.Is(err, core.ErrInvalid) {
					t.Errorf("%s: panicked with %v, want ErrInvalid", name, err)
				}
			}()
			build()
		}()
	}
}
