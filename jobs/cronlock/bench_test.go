package cronlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/jobs/cronlock"
)

// BenchmarkFire measures one firing of a job on a warm client against a local redis-server: "ran"
// takes the lock, runs an empty job and releases writing the marker (two round trips); "done" finds
// the marker (one round trip); "redis_time" is mostly "done" after a TIME command (two round trips).
func BenchmarkFire(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	c := locktest.NewClient(b, rdb)
	noop := cronlock.Func(func(context.Context) error { return nil })
	s := cronlock.Every(time.Second)
	base := time.Unix(1_900_000_000, 0)
	b.Run("ran", func(b *testing.B) {
		var now time.Time
		l := newLocker(b, c, cronlock.WithClock(func() time.Time { return now }))
		job := l.Wrap("bench-ran", s)(noop)
		for i := 0; b.Loop(); i++ {
			now = base.Add(time.Duration(i) * time.Second) // a new tick every time
			job.Run()
		}
	})
	b.Run("done", func(b *testing.B) {
		l := newLocker(b, c, cronlock.WithClock(fixed(base)))
		job := l.Wrap("bench-done", s)(noop)
		job.Run() // runs and marks the tick; every later firing is skipped
		for b.Loop() {
			job.Run()
		}
	})
	b.Run("redis_time", func(b *testing.B) {
		l := newLocker(b, c, cronlock.WithRedisTime(rdb))
		job := l.Wrap("bench-time", s)(noop)
		for b.Loop() {
			job.Run() // the first firing of a second runs, the others find its marker
		}
	})
}
