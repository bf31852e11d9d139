package chaos_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// cmdLog keeps the commands a client sent.
type cmdLog struct {
	mu   sync.Mutex
	cmds []redis.Cmder
}

func (l *cmdLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l *cmdLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.mu.Lock()
		l.cmds = append(l.cmds, cmd)
		l.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (l *cmdLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// sent returns the commands op made the client send.
func (l *cmdLog) sent(op func()) []redis.Cmder {
	l.mu.Lock()
	l.cmds = nil
	l.mu.Unlock()
	op()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cmds
}

// loggedClient returns a Client on a new server whose commands log keeps.
func loggedClient(t *testing.T) (*core.Client, *cmdLog) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	log := &cmdLog{}
	rdb.AddHook(log)
	c, err := core.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, log
}

// releaseToken (the history's way to see a give-back's release fail) knows a lock's and a
// permit's release by their arguments as core sends them, and takes no acquisition for one.
func TestReleaseToken_knowsCoreReleases(t *testing.T) {
	c, log := loggedClient(t)
	ctx := context.Background()
	for _, opts := range [][]core.AcquireOption{nil, {core.Permits(2)}} {
		l, err := c.Acquire(ctx, "n", time.Second, opts...)
		if err != nil {
			t.Fatal(err)
		}
		cmds := log.sent(func() {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
		found := false
		for _, cmd := range cmds {
			if tok, ok := releaseToken(cmd); ok && tok == l.Token() {
				found = true
			}
		}
		if !found {
			t.Errorf("permits %v: the release of token %.8s was not recognized among %v", opts != nil, l.Token(), cmds)
		}
	}
	cmds := log.sent(func() {
		if _, err := c.Acquire(ctx, "m", time.Second); err != nil {
			t.Fatal(err)
		}
	})
	for _, cmd := range cmds {
		if _, ok := releaseToken(cmd); ok {
			t.Errorf("an acquisition taken for a release: %v", cmd.Args())
		}
	}
}

// acquireToken (the history's way to know a failed acquisition's token, for the orphan check)
// knows every kind of acquisition as core sends it, and takes no release, renewal or TTL for one.
func TestAcquireToken_knowsCoreAcquisitions(t *testing.T) {
	c, log := loggedClient(t)
	ctx := context.Background()
	var err error
	for _, tc := range []struct {
		what string
		opts []core.AcquireOption
	}{{"lock", nil}, {"fair lock", []core.AcquireOption{core.Fair()}}, {"permit", []core.AcquireOption{core.Permits(2)}}} {
		var l *core.Lock
		cmds := log.sent(func() {
			if l, err = c.Acquire(ctx, "a-"+tc.what, time.Second, tc.opts...); err != nil {
				t.Fatal(err)
			}
		})
		found := false
		for _, cmd := range cmds {
			if tok, ok := acquireToken(cmd); ok && tok == l.Token() {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: its acquisition was not recognized among %v", tc.what, cmds)
		}
		cmds = log.sent(func() {
			_ = l.Extend(ctx, 2*time.Second)
			_, _ = l.TTL(ctx)
			_ = l.Release(ctx)
		})
		for _, cmd := range cmds {
			if _, ok := acquireToken(cmd); ok {
				t.Errorf("%s: %v taken for an acquisition", tc.what, cmd.Args())
			}
		}
	}
	var set *core.LockSet
	cmds := log.sent(func() {
		if set, err = c.AcquireAll(ctx, []string{"s1", "s2", "s3"}, time.Second); err != nil {
			t.Fatal(err)
		}
	})
	n := 0
	for _, cmd := range cmds {
		if _, ok := acquireToken(cmd); ok {
			n++
		}
	}
	if n == 0 {
		t.Errorf("a set's acquisition was not recognized among %v", cmds)
	}
	_ = set.Release(ctx)
}
