package core_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// scriptCounter is a go-redis hook counting the scripts sent.
type scriptCounter struct{ n atomic.Int64 }

func (s *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.n.Add(1)
		return next(ctx, cmd)
	}
}
func (s *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// validAcquire says whether core documents these arguments as valid (wait: WithWait's, or -1 for
// TryAcquire, which takes no WithWait).
func validAcquire(name string, ttl time.Duration, owner, guard string, wait time.Duration) bool {
	switch {
	case name == "" || len(name) > 1024 || name[0] == '}' || name[0] == '@':
		return false
	case ttl < 10*time.Millisecond || ttl > 24*time.Hour:
		return false
	case len(owner) > 128 || strings.IndexByte(owner, 0) >= 0 || wait == 0 || wait < -1:
		return false
	case guard != "" && (!strings.Contains(guard, "{"+name+"}") || len(guard) > 2048):
		return false
	}
	return true
}

// FuzzAcquire_validation feeds names, TTLs, owner tokens, guard keys and wait limits to Acquire. What
// core documents as invalid is refused with ErrInvalid before anything is sent; everything else is
// accepted by a real Redis (the names are fresh, so the lock is free) and released.
func FuzzAcquire_validation(f *testing.F) {
	f.Add("orders", int64(1000), "", "", int64(-1))
	f.Add("", int64(1000), "", "", int64(-1))
	f.Add("}x", int64(1000), "", "", int64(-1))
	f.Add("a{b}c", int64(10), "tok", "", int64(0))
	f.Add("\x00\xff\n{}", int64(86_400_000), strings.Repeat("o", 128), "", int64(5))
	f.Add("n", int64(9), "", "", int64(-1))
	f.Add("n", int64(86_400_001), "", "", int64(-1))
	f.Add("n", int64(-5), strings.Repeat("o", 129), "", int64(-1))
	f.Add("job", int64(1000), "", "lockkit:done:{job}", int64(-1))
	f.Add("job", int64(1000), "", "lockkit:done:{other}", int64(-1))
	f.Add(strings.Repeat("k", 1024), int64(1000), "", "", int64(-1))
	f.Add(strings.Repeat("k", 1025), int64(1000), "", "", int64(-1))
	f.Add("w", int64(1000), "", "", int64(-7))
	srv := redistest.Start(f)
	rdb := srv.Client(f)
	counter := &scriptCounter{}
	rdb.AddHook(counter)
	c := locktest.NewClient(f, rdb)
	var seq atomic.Int64
	f.Fuzz(func(t *testing.T, name string, ttlMs int64, owner, guard string, waitMs int64) {
		ttl := time.Duration(ttlMs) * time.Millisecond
		if ttlMs > math.MaxInt64/int64(time.Millisecond) || ttlMs < math.MinInt64/int64(time.Millisecond) {
			ttl = time.Duration(ttlMs) // keep overflowing values as raw nanoseconds
		}
		try := waitMs == -1 // TryAcquire; otherwise Acquire WithWait (at most 50 ms)
		wait := min(time.Duration(waitMs)*time.Millisecond, 50*time.Millisecond)
		if try {
			wait = -1
		}
		if validAcquire(name, ttl, owner, guard, wait) {
			// A fresh name, so that the lock is free and its guard key absent.
			fresh := name + "#" + strconv.FormatInt(seq.Add(1), 10) + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
			guard = strings.ReplaceAll(guard, "{"+name+"}", "{"+fresh+"}")
			name = fresh
		}
		ok := validAcquire(name, ttl, owner, guard, wait)
		var opts []core.AcquireOption
		if owner != "" {
			opts = append(opts, core.WithToken(owner))
		}
		if guard != "" {
			opts = append(opts, core.WithGuard(guard))
		}
		ctx := context.Background()
		before := counter.n.Load()
		var l *core.Lock
		var err error
		if try {
			l, err = c.TryAcquire(ctx, name, ttl, opts...)
		} else {
			l, err = c.Acquire(ctx, name, ttl, append(opts, core.WithWait(wait))...)
		}
		if !ok {
			if !errors.Is(err, core.ErrInvalid) {
				t.Fatalf("invalid input accepted: name %q ttl %v owner %d bytes guard %q wait %v: %v", name, ttl, len(owner), guard, wait, err)
			}
			if n := counter.n.Load() - before; n != 0 {
				t.Fatalf("%d commands sent for an invalid input", n)
			}
			if len(owner) > 8 && strings.Contains(err.Error(), owner) {
				t.Fatalf("error shows the owner token: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid input refused: name %q ttl %v owner %d bytes guard %q wait %v: %v", name, ttl, len(owner), guard, wait, err)
		}
		if l.Fence() <= 0 || l.Name() != name || l.Key() != locktest.Key(name) || (owner != "" && l.Token() != owner) {
			t.Fatalf("lock %q key %q fence %d", l.Name(), l.Key(), l.Fence())
		}
		if err := l.Release(ctx); err != nil && !(ttl < 100*time.Millisecond && errors.Is(err, core.ErrNotHeld)) {
			t.Fatalf("release: %v", err)
		}
	})
}

// validOptions says whether core documents these Client options as valid.
func validOptions(prefix string, ratio float64, bmin, bmax, waiter, node time.Duration, replicas int, rwait time.Duration) bool {
	switch {
	case strings.ContainsAny(prefix, "{}"):
		return false
	case !(ratio >= 0.05 && ratio <= 0.8):
		return false
	case bmin <= 0 || bmax < bmin:
		return false
	case waiter < 100*time.Millisecond || node < 0:
		return false
	case replicas < 0 || (replicas > 0 && rwait <= 0):
		return false
	}
	return true
}

// FuzzNew_options feeds option values to New and NewRedlock: documented-invalid ones give
// ErrInvalid; valid ones make a Client whose keys use the prefix (checked on a real Redis).
func FuzzNew_options(f *testing.F) {
	f.Add("lockkit:", 1.0/3, int64(20), int64(1000), int64(5000), int64(0), 0, int64(0))
	f.Add("app{1}:", 0.3, int64(20), int64(1000), int64(5000), int64(0), 0, int64(0))
	f.Add("", 0.05, int64(1), int64(1), int64(100), int64(10), 0, int64(0))
	f.Add("p:", 0.8, int64(1), int64(1), int64(100), int64(10), 1, int64(0))
	f.Add("p:", 0.81, int64(1), int64(1), int64(100), int64(10), 0, int64(0))
	f.Add("p:", math.NaN(), int64(1), int64(1), int64(100), int64(10), 0, int64(0))
	f.Add("p:", 0.5, int64(0), int64(1), int64(100), int64(10), 0, int64(0))
	f.Add("p:", 0.5, int64(5), int64(4), int64(99), int64(-1), -1, int64(1))
	f.Add("\x00\xff", 0.5, int64(5), int64(5), int64(100), int64(0), 2, int64(10))
	srv := redistest.Start(f)
	rdb := srv.Client(f)
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	var seq atomic.Int64
	f.Fuzz(func(t *testing.T, prefix string, ratio float64, bmin, bmax, waiter, node int64, replicas int, rwait int64) {
		opts := []core.Option{core.WithPrefix(prefix), core.WithRenewRatio(ratio), core.WithRetryBackoff(ms(bmin), ms(bmax)),
			core.WithFairWaiterTimeout(ms(waiter)), core.WithNodeTimeout(ms(node)), core.WithReplicaAck(replicas, ms(rwait))}
		ok := validOptions(prefix, ratio, ms(bmin), ms(bmax), ms(waiter), ms(node), replicas, ms(rwait))
		for _, mk := range []func() (*core.Client, error){
			func() (*core.Client, error) { return core.New(rdb, opts...) },
			func() (*core.Client, error) { return core.NewRedlock([]redis.UniversalClient{rdb}, opts...) },
		} {
			c, err := mk()
			if !ok {
				if !errors.Is(err, core.ErrInvalid) || c != nil {
					t.Fatalf("invalid options accepted: %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("valid options refused: %v", err)
			}
			if c.Prefix() != prefix {
				t.Fatalf("prefix %q, want %q", c.Prefix(), prefix)
			}
			if replicas == 0 && len(prefix) < 256 {
				name := "p" + strconv.FormatInt(seq.Add(1), 10)
				l, err := c.TryAcquire(context.Background(), name, time.Second)
				if err != nil {
					t.Fatalf("acquire: %v", err)
				}
				if l.Key() != prefix+"{"+name+"}" || !heldOn(t, srv, l.Key()) {
					t.Fatalf("key %q not stored under the prefix %q", l.Key(), prefix)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if err := c.Close(ctx); err != nil {
				t.Fatalf("close: %v", err)
			}
			cancel()
		}
	})
}
