package redistest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
)

// ctx returns a context bounded by d, cancelled when the test ends.
func ctx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return c
}

func TestStartSetGet(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	if !s.Running() {
		t.Fatal("Running() = false after Start")
	}
	if want := "127.0.0.1:"; !strings.HasPrefix(s.Addr(), want) || s.Port() == 0 {
		t.Fatalf("Addr() = %q, Port() = %d", s.Addr(), s.Port())
	}
	c := s.Client(t)
	if err := c.Set(ctx(t, 5*time.Second), "lockkit:k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx(t, 5*time.Second), "lockkit:k").Result()
	if err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	if got := s.Do(t, "GET", "lockkit:k"); got != "v" {
		t.Fatalf("Do GET = %v; want v", got)
	}
	if got := s.Do(t, "GET", "lockkit:missing"); got != nil {
		t.Fatalf("Do GET missing = %v; want nil", got)
	}
	s.Flush(t)
	if got := s.Do(t, "DBSIZE"); got != int64(0) {
		t.Fatalf("DBSIZE after Flush = %v", got)
	}
}

func TestStopThenConnectionFails(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	o := s.Options()
	o.MaxRetries = -1
	c := redis.NewClient(o)
	defer func() { _ = c.Close() }()
	if err := c.Ping(ctx(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	s.Stop(t)
	if s.Running() {
		t.Fatal("Running() = true after Stop")
	}
	if err := c.Ping(ctx(t, 5*time.Second)).Err(); err == nil {
		t.Fatal("PING succeeded after Stop")
	}
	s.Stop(t) // idempotent
	s.Kill(t) // also a no-op now
}

func TestRestartSamePortEmptyData(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	port := s.Port()
	c := s.Client(t)
	if err := c.Set(ctx(t, 5*time.Second), "lockkit:k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Restart(t)
	if s.Port() != port || !s.Running() {
		t.Fatalf("after Restart: port %d (was %d), running %v", s.Port(), port, s.Running())
	}
	err := c.Get(ctx(t, 5*time.Second), "lockkit:k").Err()
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart: err = %v; want redis.Nil", err)
	}
}

func TestKillThenRestart(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	s.Kill(t)
	if s.Running() {
		t.Fatal("Running() = true after Kill")
	}
	s.Restart(t)
	if err := s.Client(t).Ping(ctx(t, 5*time.Second)).Err(); err != nil {
		t.Fatalf("PING after Kill+Restart: %v", err)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	o := s.Options()
	o.MaxRetries = -1
	o.ContextTimeoutEnabled = true
	c := redis.NewClient(o)
	defer func() { _ = c.Close() }()
	if err := c.Ping(ctx(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}

	s.Pause(t)
	if !s.Running() || !s.Paused() {
		t.Fatalf("after Pause: Running %v, Paused %v", s.Running(), s.Paused())
	}
	start := time.Now()
	if err := c.Ping(ctx(t, 200*time.Millisecond)).Err(); err == nil {
		t.Fatal("PING succeeded on a paused server")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("PING on a paused server took %v; want about 200ms", d)
	}

	s.Resume(t)
	if s.Paused() {
		t.Fatal("Paused() = true after Resume")
	}
	if err := c.Ping(ctx(t, 5*time.Second)).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestStopPausedServer(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	s.Pause(t)
	start := time.Now()
	s.Stop(t)
	if s.Running() {
		t.Fatal("Running() = true after Stop")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("Stop of a paused server took %v; want a graceful stop", d)
	}
}

func TestWithPassword(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithPassword("s3cret"))
	if got := s.Options().Password; got != "s3cret" {
		t.Fatalf("Options().Password = %q", got)
	}
	o := s.Options()
	o.Password = ""
	o.MaxRetries = -1
	anon := redis.NewClient(o)
	defer func() { _ = anon.Close() }()
	err := anon.Set(ctx(t, 5*time.Second), "lockkit:k", "v", 0).Err()
	if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("unauthenticated SET: err = %v; want NOAUTH", err)
	}
	if err := s.Client(t).Set(ctx(t, 5*time.Second), "lockkit:k", "v", 0).Err(); err != nil {
		t.Fatalf("authenticated SET: %v", err)
	}
	if got := s.Do(t, "GET", "lockkit:k"); got != "v" {
		t.Fatalf("Do GET = %v", got)
	}
	if s.CommandStats(t)["set"] != 1 {
		t.Fatalf("CommandStats()[set] = %d; want 1", s.CommandStats(t)["set"])
	}
	s.Restart(t)
	s.Stop(t)
}

func TestWithACL(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithACL(
		"user default off",
		"user app on >app-secret ~lockkit:* &* +@all",
	))
	if o := s.Options(); o.Username != "app" || o.Password != "app-secret" {
		t.Fatalf("Options() user %q password %q; want app, app-secret", o.Username, o.Password)
	}
	c := s.Client(t)
	if err := c.Set(ctx(t, 5*time.Second), "lockkit:k", "v", 0).Err(); err != nil {
		t.Fatalf("SET lockkit:k as app: %v", err)
	}
	err := c.Set(ctx(t, 5*time.Second), "other:k", "v", 0).Err()
	if err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("SET other:k as app: err = %v; want NOPERM", err)
	}

	o := s.Options()
	o.Username, o.Password = "", ""
	o.MaxRetries = -1
	anon := redis.NewClient(o)
	defer func() { _ = anon.Close() }()
	if err := anon.Set(ctx(t, 5*time.Second), "lockkit:k", "v", 0).Err(); err == nil {
		t.Fatal("SET as the disabled default user succeeded")
	}

	// The admin helpers still work.
	if got := s.Do(t, "GET", "lockkit:k"); got != "v" {
		t.Fatalf("Do GET = %v", got)
	}
	s.Do(t, "SET", "other:k", "v")
	if s.CommandStats(t)["set"] < 2 {
		t.Fatalf("CommandStats = %v", s.CommandStats(t))
	}
	s.Flush(t)
}

func TestWithACLAndPassword(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t,
		redistest.WithPassword("pw"),
		redistest.WithACL("user app on >app-secret ~lockkit:* +@all"))
	o := s.Options()
	o.Username, o.Password = "", "pw"
	c := redis.NewClient(o)
	defer func() { _ = c.Close() }()
	if err := c.Set(ctx(t, 5*time.Second), "any:k", "v", 0).Err(); err != nil {
		t.Fatalf("SET as default user with the password: %v", err)
	}
	if err := s.Client(t).Set(ctx(t, 5*time.Second), "lockkit:k", "v", 0).Err(); err != nil {
		t.Fatalf("SET as app: %v", err)
	}
}

func TestWithTLS(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithTLS())
	if s.TLSConfig() == nil || s.Options().TLSConfig == nil {
		t.Fatal("no TLS config with WithTLS")
	}
	c := s.Client(t)
	if err := c.Set(ctx(t, 5*time.Second), "lockkit:k", "v", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	o := s.Options()
	o.TLSConfig = nil
	o.MaxRetries = -1
	o.ContextTimeoutEnabled = true
	plain := redis.NewClient(o)
	defer func() { _ = plain.Close() }()
	if err := plain.Ping(ctx(t, time.Second)).Err(); err == nil {
		t.Fatal("PING without TLS on the TLS port succeeded")
	}
	if got := s.Do(t, "GET", "lockkit:k"); got != "v" {
		t.Fatalf("Do GET over TLS = %v", got)
	}
	s.Restart(t)
	if err := c.Ping(ctx(t, 5*time.Second)).Err(); err != nil {
		t.Fatalf("PING over TLS after Restart: %v", err)
	}
}

func TestWithoutTLSConfig(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	if s.TLSConfig() != nil || s.Options().TLSConfig != nil {
		t.Fatal("TLS config without WithTLS")
	}
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithArgs("--maxmemory", "10mb"))
	got := s.Do(t, "CONFIG", "GET", "maxmemory")
	m, ok := got.(map[any]any)
	if !ok || m["maxmemory"] != "10485760" {
		t.Fatalf("CONFIG GET maxmemory = %#v", got)
	}
}

func TestCommandStats(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	c := s.Client(t)
	if err := c.Ping(ctx(t, 5*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	s.ResetStats(t)
	if err := c.Set(ctx(t, 5*time.Second), "lockkit:k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx(t, 5*time.Second), "lockkit:ch", "hi").Err(); err != nil {
		t.Fatal(err)
	}
	stats := s.CommandStats(t)
	if stats["set"] != 1 || stats["publish"] != 1 {
		t.Fatalf("CommandStats() = %v; want set=1 publish=1", stats)
	}
	s.ResetStats(t)
	if n, ok := s.CommandStats(t)["set"]; ok {
		t.Fatalf("set = %d after ResetStats; want absent", n)
	}
}

func TestStartN(t *testing.T) {
	t.Parallel()
	servers := redistest.StartN(t, 3)
	if len(servers) != 3 {
		t.Fatalf("StartN(3) returned %d servers", len(servers))
	}
	seen := map[string]bool{}
	for _, s := range servers {
		if seen[s.Addr()] {
			t.Fatalf("duplicate address %s", s.Addr())
		}
		seen[s.Addr()] = true
	}
	servers[0].Do(t, "SET", "lockkit:k", "v")
	for _, s := range servers[1:] {
		if got := s.Do(t, "GET", "lockkit:k"); got != nil {
			t.Fatalf("%s sees a key set on %s", s.Addr(), servers[0].Addr())
		}
	}
}
