package core_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/core/internal/script"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// slowAcquire is a go-redis hook on one Redlock node's client that makes the node slow to take a
// lock: it holds back each acquire request for key until a release of key was answered there, or
// for delay (a node that answers late), and records in which order the node answered them.
type slowAcquire struct {
	key      string
	delay    time.Duration
	detached bool          // the request ignores its context (its deadline: the node timeout)
	released chan struct{} // closed when the node answered a release of key
	once     sync.Once
	mu       sync.Mutex
	ran      []string // "acquire" and "release", in the order the node answered them
}

func newSlowAcquire(key string, delay time.Duration) *slowAcquire {
	return &slowAcquire{key: key, delay: delay, released: make(chan struct{})}
}

func (h *slowAcquire) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowAcquire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *slowAcquire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	acquire, release := core.ScriptSHA1(script.Scripts().Acquire.Source), core.ScriptSHA1(script.Scripts().Release.Source)
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 4 || args[3] != h.key {
			return next(ctx, cmd)
		}
		switch args[1] {
		case acquire:
			t := time.NewTimer(h.delay) // the node's latency
			defer t.Stop()
			done := ctx.Done()
			if h.detached {
				ctx, done = context.WithoutCancel(ctx), nil
			}
			select {
			case <-h.released:
			case <-t.C:
			case <-done:
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
			err := next(ctx, cmd)
			h.record("acquire")
			return err
		case release:
			err := next(ctx, cmd)
			h.record("release")
			h.once.Do(func() { close(h.released) })
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *slowAcquire) record(what string) {
	h.mu.Lock()
	h.ran = append(h.ran, what)
	h.mu.Unlock()
}

func (h *slowAcquire) answered() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ran)
}

// A release right after a Redlock acquisition reaches a slow node only after that node's
// acquisition request: it used to overtake it there (the acquisition returned once a quorum
// granted; its request to the slow node was still on its way), and the slow node then granted
// the late request and kept the lock, held by nobody, until its TTL.
func TestRedlock_releaseFollowsSlowNodesAcquisition(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	var key = locktest.Key("k")
	slow := newSlowAcquire(key, time.Second) // well within the node timeout
	c := redlockSlowNode(t, srvs, slow, core.WithNodeTimeout(5*time.Second))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "k", 30*time.Second) // granted by nodes 0 and 1; node 2 is slow
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "node 2 answered the acquisition and the release", func() bool {
		return len(slow.answered()) == 2
	})
	if got := slow.answered(); !slices.Equal(got, []string{"acquire", "release"}) {
		t.Errorf("node 2 answered %v: the release overtook the acquisition", got)
	}
	for _, s := range srvs {
		locktest.Eventually(t, 2*time.Second, "lock freed on "+s.Addr(), func() bool { return !heldOn(t, s, key) })
	}
}

// A release that cannot wait for a slow node's acquisition request (ReleaseSet waits for each node
// at most the node timeout; here the request outlives it, as with a go-redis client that does not
// apply context deadlines to its sockets) leaves the grant that request brings to be given back.
func TestRedlock_releaseSetGivesBackAGrantThatOutlivedIt(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	var key = locktest.Key("k")
	const nodeTimeout = 200 * time.Millisecond
	slow := newSlowAcquire(key, 3*nodeTimeout)
	slow.detached = true
	c := redlockSlowNode(t, srvs, slow, core.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	l, err := c.Acquire(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ReleaseSet(ctx, "lockkit:done:{k}", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "node 2 answered the acquisition", func() bool { return len(slow.answered()) > 0 })
	if got := slow.answered(); got[0] != "acquire" {
		t.Errorf("node 2 answered %v: the release overtook the acquisition", got)
	}
	for _, s := range srvs {
		locktest.Eventually(t, 2*time.Second, "lock freed on "+s.Addr(), func() bool { return !heldOn(t, s, key) })
	}
}

// redlockSlowNode returns a Redlock client over srvs whose client of the last node has the hook
// slow; the scripts are loaded on every node (so that each request is one round trip).
func redlockSlowNode(t *testing.T, srvs []*redistest.Server, slow *slowAcquire, opts ...core.Option) *core.Client {
	t.Helper()
	var nodes []redis.UniversalClient
	for i, s := range srvs {
		o := s.Options()
		o.MaxRetries = -1
		o.ContextTimeoutEnabled = true
		rdb := redis.NewClient(o)
		t.Cleanup(func() { _ = rdb.Close() })
		if i == len(srvs)-1 {
			rdb.AddHook(slow)
		}
		nodes = append(nodes, rdb)
	}
	c, err := core.NewRedlock(nodes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	ctx := context.Background()
	// Load the scripts on every node (a request that finds none costs a second round trip).
	locktest.Eventually(t, 5*time.Second, "the scripts loaded within the node timeout", func() bool {
		l, err := c.TryAcquire(ctx, "warm", time.Second)
		return err == nil && l.Release(ctx) == nil
	})
	return c
}
