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

// releaseToken (the history's way to see a give-back's release fail) knows a lock's and a
// permit's release by their arguments as core sends them, and takes no acquisition for one.
func TestReleaseToken_knowsCoreReleases(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	log := &cmdLog{}
	rdb.AddHook(log)
	c, err := core.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	ctx := context.Background()
	for _, opts := range [][]core.AcquireOption{nil, {core.Permits(2)}} {
		l, err := c.Acquire(ctx, "n", time.Second, opts...)
		if err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		log.cmds = nil
		log.mu.Unlock()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		cmds := log.cmds
		log.mu.Unlock()
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
	log.mu.Lock()
	log.cmds = nil
	log.mu.Unlock()
	if _, err := c.Acquire(ctx, "m", time.Second); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range log.cmds {
		if _, ok := releaseToken(cmd); ok {
			t.Errorf("an acquisition taken for a release: %v", cmd.Args())
		}
	}
}
