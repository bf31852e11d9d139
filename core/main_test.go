package core_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(semChildEnv); spec != "" {
		if err := semChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if spec := os.Getenv(starveChildEnv); spec != "" {
		if err := starveChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	locktest.VerifyTestMain(m)
}

// setup starts a fresh redis-server and returns it with a go-redis client and a lockkit client.
func setup(t testing.TB, opts ...core.Option) (*redistest.Server, *redis.Client, *core.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	return srv, rdb, locktest.NewClient(t, rdb, opts...)
}

// subscribers returns how many connections are subscribed to the release channel of name.
func subscribers(t testing.TB, rdb *redis.Client, name string) int64 {
	m, err := rdb.PubSubNumSub(context.Background(), locktest.Key(name, "released")).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m[locktest.Key(name, "released")]
}

// lockState reads what Redis records about the lock key on rdb.
func lockState(t testing.TB, rdb redis.Cmdable, key string) core.LockState {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("GET %s: %v", key, err)
	}
	s, ok := core.ParseLockState(v)
	if !ok {
		t.Fatalf("%s: unexpected lock value %q", key, v)
	}
	return s
}

// lockHeld reports whether somebody holds the lock key on rdb.
func lockHeld(t testing.TB, rdb redis.Cmdable, key string) bool {
	t.Helper()
	return lockState(t, rdb, key).Held()
}

// stateOn reads what the server s (a redistest.Server or a cluster node) records about the lock key.
func stateOn(t testing.TB, s interface{ Do(testing.TB, ...any) any }, key string) core.LockState {
	t.Helper()
	v, _ := s.Do(t, "GET", key).(string)
	st, ok := core.ParseLockState(v)
	if !ok {
		t.Fatalf("%s: unexpected lock value %q", key, v)
	}
	return st
}

// heldOn reports whether somebody holds the lock key on the server s.
func heldOn(t testing.TB, s interface{ Do(testing.TB, ...any) any }, key string) bool {
	t.Helper()
	return stateOn(t, s, key).Held()
}
