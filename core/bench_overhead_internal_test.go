//go:build unix

package core

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core/internal/script"
	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/redis/go-redis/v9"
)

// instantRunner answers acquire.lua with a fresh fence and release.lua with "no hold left", at
// once and without a server: what is left of a lock + unlock is lockkit's own client-side work
// (issue #31: its share of the pipelined rows' client CPU, without go-redis's and the network's).
type instantRunner struct {
	fence            atomic.Int64
	acquire, release string
}

func (r *instantRunner) Process(_ context.Context, cmd redis.Cmder) error {
	c, ok := cmd.(*redis.Cmd)
	args := cmd.Args()
	var sha any
	if len(args) > 1 {
		sha = args[1]
		if src, isEval := sha.(string); isEval && args[0] == "eval" {
			sha = ScriptSHA1(src) // (a script that hashes.go would lack goes as EVAL)
		}
	}
	switch {
	case !ok || len(args) < 2:
		cmd.SetErr(errors.New("unexpected command"))
	case sha == r.acquire:
		c.SetVal(r.fence.Add(1))
	case sha == r.release:
		c.SetVal(int64(0))
	default:
		cmd.SetErr(errors.New("unexpected script"))
	}
	return cmd.Err()
}

// BenchmarkOverhead_lockUnlock is one Acquire + Release of an uncontended lock, each goroutine on
// its own key, with the replies given at once: lockkit's own CPU and allocations per lock + unlock.
func BenchmarkOverhead_lockUnlock(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer func() { _ = rdb.Close() }()
	c, err := New(rdb, WithPipelining(8))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	set := script.Scripts()
	c.st.(*store.Node).SetRunner(script.NewSender(&instantRunner{acquire: ScriptSHA1(set.Acquire.Source),
		release: ScriptSHA1(set.Release.Source)}))
	ctx := context.Background()
	var ids atomic.Int64
	b.ReportAllocs()
	cpu0 := selfCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := "overhead:" + strconv.FormatInt(ids.Add(1), 10)
		for pb.Next() {
			l, err := c.Acquire(ctx, key, 8*time.Second)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(selfCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// selfCPU is the CPU time (user + system) the process has used, in ns.
func selfCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
