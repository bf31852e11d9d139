package exactlyonce_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/exactlyonce"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { locktest.VerifyTestMain(m) }

func newStore(t testing.TB, locks *core.Client, cfg exactlyonce.Config) *exactlyonce.Store {
	t.Helper()
	if cfg.Namespace == "" {
		cfg.Namespace = "test"
	}
	if cfg.TTL == 0 {
		cfg.TTL = time.Second
	}
	if cfg.Retention == 0 {
		cfg.Retention = time.Minute
	}
	cfg.Component = "test"
	s, err := exactlyonce.New(locks, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fp(s string) func() ([32]byte, error) {
	return func() ([32]byte, error) { return sha256.Sum256([]byte(s)), nil }
}

func TestStore_runStoreReplayMismatchInFlight(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locks := locktest.NewClient(t, rdb)
	s := newStore(t, locks, exactlyonce.Config{})
	ctx := context.Background()
	key := s.Key("POST", "/orders", "alice", "k1")
	if !strings.HasPrefix(key.Lock(), "@test/") || key.Record() != "lockkit:idem:{"+key.Lock()+"}" {
		t.Fatalf("lock %q record %q", key.Lock(), key.Record())
	}
	req := &exactlyonce.Request{Key: key, Fingerprint: fp("pizza")}
	run, rec, err := s.Begin(ctx, req)
	if run == nil || rec != nil || err != nil {
		t.Fatalf("first: %v %v %v", run, rec, err)
	}
	if l, ok := core.FromContext(run.Context()); !ok || l.Name() != key.Lock() {
		t.Fatal("the run's context does not carry the lock")
	}
	// In flight: told apart from a mismatch and a replay.
	_, _, err = s.Begin(ctx, &exactlyonce.Request{Key: key, Fingerprint: fp("pasta")})
	var inFlight *exactlyonce.InFlightError
	if !errors.As(err, &inFlight) || !errors.Is(err, exactlyonce.ErrInFlight) || inFlight.RetryAfter <= 0 {
		t.Fatalf("in flight: %v", err)
	}
	want := exactlyonce.Encode('x', sha256.Sum256([]byte("pizza")), []byte("outcome"))
	if err := run.Store(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, key.Record()).Val(); ttl <= 50*time.Second || ttl > time.Minute {
		t.Fatalf("record TTL %v, want the retention", ttl)
	}
	_, rec, err = s.Begin(ctx, req)
	if err != nil || rec == nil || rec.Kind != 'x' || rec.Payload != "outcome" {
		t.Fatalf("replay: %+v %v", rec, err)
	}
	if _, _, err := s.Begin(ctx, &exactlyonce.Request{Key: key, Fingerprint: fp("pasta")}); !errors.Is(err, exactlyonce.ErrMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	// A record of another format under the key is unreadable, never misread.
	rdb.Set(ctx, key.Record(), "\x01old", time.Minute)
	if _, _, err := s.Begin(ctx, req); !errors.Is(err, exactlyonce.ErrUnreadable) {
		t.Fatalf("unreadable: %v", err)
	}
}

func TestStore_releaseLetsTheWorkRunAgain_andLostStoresNothing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locks := locktest.NewClient(t, rdb, core.WithRenewRatio(0.05))
	var logs bytes.Buffer
	s := newStore(t, locks, exactlyonce.Config{TTL: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	req := &exactlyonce.Request{Key: s.Key("k"), Log: []slog.Attr{slog.String("route", "/x")}}
	run, _, _ := s.Begin(ctx, req)
	if err := run.Release(ctx, "retry answer"); err != nil {
		t.Fatal(err)
	}
	run, _, err := s.Begin(ctx, req)
	if run == nil {
		t.Fatalf("after a release: %v", err)
	}
	rdb.Del(ctx, locktest.Key(req.Key.Lock())) // as if the lock expired: another holder may run the work
	<-run.Context().Done()
	if err := run.Store(ctx, exactlyonce.Encode('x', [32]byte{}, nil), 0); !errors.Is(err, core.ErrLost) || run.Lost() == nil {
		t.Fatalf("store after loss: %v", err)
	}
	if n := rdb.Exists(ctx, req.Key.Record()).Val(); n != 0 {
		t.Fatal("a holder that lost the lock stored its outcome")
	}
	if l := logs.String(); !strings.Contains(l, "response not stored: retry answer") ||
		!strings.Contains(l, "response not stored: lock lost") || !strings.Contains(l, "route=/x") {
		t.Fatalf("log: %s", l)
	}
}

func TestStore_unavailable_failClosedOrOpen(t *testing.T) {
	srv := redistest.Start(t)
	o := srv.Options()
	o.MaxRetries = -1
	rdb := redis.NewClient(o)
	defer rdb.Close()
	locks := locktest.NewClient(t, rdb)
	closed := newStore(t, locks, exactlyonce.Config{})
	open := newStore(t, locks, exactlyonce.Config{FailOpen: true})
	srv.Stop(t)
	ctx := context.Background()
	if _, _, err := closed.Begin(ctx, &exactlyonce.Request{Key: closed.Key("k")}); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("fail closed: %v", err)
	}
	run, _, err := open.Begin(ctx, &exactlyonce.Request{Key: open.Key("k")})
	if err != nil || run == nil || run.Lock() != nil || run.Context() != ctx {
		t.Fatalf("fail open: %v %v", run, err)
	}
	if err := run.Store(ctx, nil, 0); err != nil {
		t.Fatal(err)
	}
}

func TestNew_invalidConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	good := exactlyonce.Config{Namespace: "x", TTL: time.Second, Retention: time.Hour}
	for name, mod := range map[string]func(*exactlyonce.Config){
		"namespace": func(c *exactlyonce.Config) { c.Namespace = "X/" },
		"ttl":       func(c *exactlyonce.Config) { c.TTL = time.Millisecond },
		"wait":      func(c *exactlyonce.Config) { c.Wait = -1 },
		"retention": func(c *exactlyonce.Config) { c.Retention = 0 },
		"prefix":    func(c *exactlyonce.Config) { c.RecordPrefix = "a{b" },
	} {
		cfg := good
		mod(&cfg)
		if _, err := exactlyonce.New(locks, cfg); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := exactlyonce.New(locks, good); err != nil {
		t.Fatal(err)
	}
}

// FuzzKey checks that key derivation is injective over hostile parts: moving bytes between parts,
// adding or dropping a part never gives the same lock, and every name stays in the namespace.
func FuzzKey(f *testing.F) {
	f.Add("POST", "/orders", "k")
	f.Add("POST", "/orders/", "k")
	f.Add("POST /", "orders", "k")
	f.Add("", "", "")
	f.Add("\x00", "\x01\x00", "@cron/billing")
	f.Add("GET", "}", "{")
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		f.Fatal(err)
	}
	s := newStore(f, locks, exactlyonce.Config{Namespace: "http-idem"})
	f.Fuzz(func(t *testing.T, a, b, c string) {
		k := s.Key(a, b, c)
		if !strings.HasPrefix(k.Lock(), "@http-idem/") || len(k.Lock()) != len("@http-idem/")+64 ||
			k.Record() != "lockkit:idem:{"+k.Lock()+"}" {
			t.Fatalf("key %q record %q", k.Lock(), k.Record())
		}
		others := [][]string{{a + b, "", c}, {a, b + c, ""}, {a, b, c, ""}, {a, b}, {a + "\x00", b, c}}
		if len(b) > 0 {
			others = append(others, []string{a + b[:1], b[1:], c})
		}
		for _, o := range others {
			if (len(o) != 3 || o[0] != a || o[1] != b || o[2] != c) && s.Key(o...).Lock() == k.Lock() {
				t.Fatalf("%q and %q collide", o, []string{a, b, c})
			}
		}
		named := s.KeyNamed(a, ":"+b)
		if named.Lock() != "@http-idem/"+a || !strings.HasPrefix(named.Record(), "lockkit:idem:{@http-idem/"+a+"}") {
			t.Fatalf("named key %q record %q", named.Lock(), named.Record())
		}
	})
}

// FuzzDecode: any stored value is either rejected or decoded consistently.
func FuzzDecode(f *testing.F) {
	f.Add(string(exactlyonce.Encode('h', [32]byte{1}, []byte("body"))))
	f.Add("\x01" + strings.Repeat("f", 40))
	f.Add("lkg1" + strings.Repeat("f", 40))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := exactlyonce.Decode(s)
		if err != nil {
			return
		}
		if back := exactlyonce.Encode(r.Kind, r.Fingerprint, []byte(r.Payload)); string(back) != s {
			t.Fatalf("decoded %+v does not encode back to the record", r)
		}
	})
}
