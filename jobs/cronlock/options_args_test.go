package cronlock_test

import (
	"errors"
	"testing"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/cronlock"
	"github.com/redis/go-redis/v9"
)

// A nil argument that would be read as the default (the local clock, no hook) is refused by New,
// naming the option.
func TestOptions_nilArgumentsAreRefused(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv.Client(t))
	var unset *redis.Client
	for _, tc := range []struct {
		want string
		opt  cronlock.Option
	}{
		{"lockkit: cronlock: WithRedisTime(nil)", cronlock.WithRedisTime(nil)},
		{"lockkit: cronlock: WithRedisTime(nil)", cronlock.WithRedisTime(unset)},
		{"lockkit: cronlock: WithHook(nil)", cronlock.WithHook(nil)},
	} {
		_, err := cronlock.New(c, tc.opt)
		if !errors.Is(err, cronlock.ErrInvalid) || !errors.Is(err, core.ErrInvalid) || err == nil || err.Error() != tc.want {
			t.Errorf("New: %v, want %q matching ErrInvalid", err, tc.want)
		}
	}
	if _, err := cronlock.New(c, cronlock.WithRedisTime(srv.Client(t)), cronlock.WithHook(func(cronlock.Event) {})); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
