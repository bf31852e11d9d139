package main_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
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

// docTarget is where doc commands run: one server, or a cluster.
type docTarget struct {
	addr   string                               // the address every server address of a doc stands for
	flush  func(t *testing.T)                   // empty it
	client func(d dialer) redis.UniversalClient // a new client that dials through d
}

type dialer func(ctx context.Context, network, addr string) (net.Conn, error)

func singleTarget(srv *redistest.Server) docTarget {
	return docTarget{addr: srv.Addr(), flush: func(t *testing.T) { srv.Flush(t) },
		client: func(d dialer) redis.UniversalClient {
			o := srv.Options()
			o.Dialer, o.MaxRetries, o.DialerRetries = d, -1, 1
			return redis.NewClient(o)
		}}
}

func clusterTarget(t *testing.T, cl *redistest.Cluster) docTarget {
	admin := cl.Client(t)
	return docTarget{addr: cl.Addrs()[0],
		flush: func(t *testing.T) {
			err := admin.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
				return m.FlushAll(ctx).Err()
			})
			if err != nil {
				t.Fatal(err)
			}
		},
		client: func(d dialer) redis.UniversalClient {
			o := cl.ClusterOptions()
			o.Dialer, o.MaxRetries, o.DialerRetries = d, -1, 1
			return redis.NewClusterClient(o)
		}}
}

// cutter is a client's network: Cut closes its connections and refuses new ones, as if its
// process had died (its locks expire, they are not released).
type cutter struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.ErrClosed}
	}
	conn, err := new(net.Dialer).DialContext(ctx, network, addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

// Cut ends the client's connections.
func (c *cutter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// docFixture is the state docs/troubleshooting.md describes, made by real clients: invoice:42
// held by a "billing" client, re-entered, with one fair waiter; report:daily held by a client
// without label, with a 2 s TTL (its network can be cut); a permit of the semaphore @http/tenant-7
// (limit 10) held by an "api" client; an idempotency record stored by httpmw and a request in
// flight; cronlock's lock of the job "report" (@cron/report); an elected leader (package election);
// the read-write lock catalog read by two clients without label, a writer queued behind them.
type docFixture struct {
	target   docTarget
	names    []string           // the names held
	idemHash string             // the hash of the stored idempotency record
	holders  map[string]*cutter // a held name's holder's network
}

func newDocFixture(t *testing.T, target docTarget) *docFixture {
	t.Helper()
	target.flush(t)
	ctx := context.Background()
	fx := &docFixture{target: target, holders: map[string]*cutter{}}
	billing, _, _ := fx.client(t, "billing")
	inv := acquire(t, billing, ctx, "invoice:42", core.Fair())
	acquire(t, billing, inv.Context(), "invoice:42") // re-entered: 2 holds
	waiter, _, _ := fx.client(t, "billing")
	wctx, stopWaiting := context.WithCancel(ctx)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, _ = waiter.Acquire(wctx, "invoice:42", 30*time.Second, core.Fair())
	}()
	t.Cleanup(func() { stopWaiting(); <-waited }) // before the clients close
	cron, _, cronNet := fx.client(t, "")
	if _, err := cron.Acquire(ctx, "report:daily", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	fx.holders["report:daily"] = cronNet
	api, _, _ := fx.client(t, "api")
	acquire(t, api, ctx, "tenant-7", core.InNamespace("http"), core.Permits(10))
	fx.idemHash = fx.idempotency(t, api)
	acquire(t, cron, ctx, "report", core.InNamespace("cron")) // as cronlock runs its job "report"
	leader, leaderRDB, _ := fx.client(t, "")
	el, err := election.New(leader, leaderRDB, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := el.Campaign(ctx, "billing-7d9f-x2k"); err != nil {
		t.Fatal(err)
	}
	fx.readWrite(t)
	fx.names = append(fx.names, "invoice:42", "report:daily", "@http/tenant-7", "@cron/report", "@election/billing", "catalog")
	locktest.Eventually(t, 5*time.Second, "a fair waiter", func() bool {
		info, err := billing.Inspect(ctx, "invoice:42")
		return err == nil && info.Queued == 1
	})
	return fx
}

// readWrite makes the read-write lock catalog: read by two clients, a writer queued.
func (fx *docFixture) readWrite(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for range 2 {
		r, _, _ := fx.client(t, "")
		acquire(t, r, ctx, "catalog", core.Read())
	}
	w, _, _ := fx.client(t, "")
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = w.Acquire(wctx, "catalog", 30*time.Second, core.Write())
	}()
	t.Cleanup(func() { stop(); <-done })
	locktest.Eventually(t, 5*time.Second, "a writer queued", func() bool {
		info, err := w.Inspect(ctx, "catalog")
		return err == nil && info.RWQueued == 1
	})
}

// client returns a new core.Client with the label, closed when the test ends, its connection
// and its network.
func (fx *docFixture) client(t *testing.T, label string) (*core.Client, redis.UniversalClient, *cutter) {
	t.Helper()
	n := new(cutter)
	rdb := fx.target.client(n.dial)
	t.Cleanup(func() { _ = rdb.Close() })
	return locktest.NewClient(t, rdb, core.WithLabel(label)), rdb, n
}

// idempotency stores a response through httpmw and leaves another request in flight (until the
// test ends); it returns the stored record's hash and adds the in-flight request's lock to names.
func (fx *docFixture) idempotency(t *testing.T, api *core.Client) string {
	t.Helper()
	release, entered := make(chan struct{}), make(chan struct{})
	h := httpmw.Idempotency(api)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "order-2" {
			close(entered)
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	}))
	post := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"sku":"A-1"}`))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := post("order-1"); w.Code != http.StatusCreated {
		t.Fatalf("POST: %d %s", w.Code, w.Body)
	}
	rdb := fx.target.client(new(cutter).dial)
	t.Cleanup(func() { _ = rdb.Close() })
	stored := fx.scan(t, rdb, "lockkit:idem:{@http-idem/*}")
	done := make(chan struct{})
	go func() { defer close(done); post("order-2") }()
	t.Cleanup(func() { close(release); <-done })
	<-entered
	for _, k := range fx.scan(t, rdb, locktest.Key("@http-idem/*")) {
		if name := strings.TrimSuffix(strings.TrimPrefix(k, "lockkit:{"), "}"); locktest.Held(t, rdb, k) {
			fx.names = append(fx.names, name)
		}
	}
	if len(stored) != 1 {
		t.Fatalf("stored records: %q", stored)
	}
	return strings.TrimSuffix(strings.TrimPrefix(stored[0], "lockkit:idem:{@http-idem/"), "}")
}

// scan returns the keys matching pattern, on every master.
func (fx *docFixture) scan(t *testing.T, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	var (
		mu   sync.Mutex
		keys []string
	)
	each := func(ctx context.Context, c *redis.Client) error {
		ks, err := c.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	}
	var err error
	if cl, ok := rdb.(*redis.ClusterClient); ok {
		err = cl.ForEachMaster(context.Background(), each)
	} else {
		err = each(context.Background(), rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// helpExamples returns the examples "lockkit help COMMAND" shows, as doc commands.
func helpExamples(t *testing.T, bin string) []docCommand {
	t.Helper()
	out, err := exec.Command(bin, "help").Output()
	if err != nil {
		t.Fatalf("lockkit help: %v", err)
	}
	_, list, _ := strings.Cut(string(out), "Commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	var cmds []docCommand
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			t.Fatalf("lockkit help lists no commands:\n%s", out)
		}
		name := f[0]
		out, err := exec.Command(bin, "help", name).Output()
		if err != nil {
			t.Fatalf("lockkit help %s: %v", name, err)
		}
		_, ex, _ := strings.Cut(string(out), "Examples:\n")
		ex, _, _ = strings.Cut(ex, "\n\n")
		for _, l := range strings.Split(ex, "\n") {
			if text := strings.TrimSpace(l); strings.HasPrefix(text, "lockkit ") {
				words, err := shellWords(text)
				if err != nil {
					t.Fatalf("lockkit help %s: %q: %v", name, text, err)
				}
				cmds = append(cmds, docCommand{where: "lockkit help " + name, text: text, words: words})
			}
		}
	}
	if len(cmds) < 5 {
		t.Fatalf("found %d examples in the commands' help, want one per command at least", len(cmds))
	}
	return cmds
}
