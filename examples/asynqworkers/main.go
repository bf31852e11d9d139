// Command asynqworkers runs several asynq servers that share tasks over a few keys, with
// asynqlock's middleware in front of the handler, and checks that no two tasks of one key ever
// overlapped. It prints one line per task and a summary; it exits with status 1 if it finds an
// overlap, a fencing token out of order, or a task that did not complete.
//
// Without -redis it starts an embedded Redis (miniredis, with TTLs that count down in real time).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/jobs/asynqlock"
	"github.com/lockkit/lockkit/lockkittest"
	"github.com/redis/go-redis/v9"
)

type config struct {
	workers, concurrency, tasks, keys int
	addr                              string
	work, timeout                     time.Duration
}

func main() {
	var c config
	flag.IntVar(&c.workers, "workers", 3, "number of asynq servers (each with its own Redis clients and lock client)")
	flag.IntVar(&c.concurrency, "concurrency", 4, "concurrent tasks per server")
	flag.IntVar(&c.tasks, "tasks", 200, "number of tasks")
	flag.IntVar(&c.keys, "keys", 10, "number of distinct task keys")
	flag.StringVar(&c.addr, "redis", os.Getenv("REDIS_ADDR"), "address of a real Redis (embedded when empty)")
	flag.DurationVar(&c.work, "work", 2*time.Millisecond, "time each task works while holding its key")
	flag.DurationVar(&c.timeout, "timeout", time.Minute, "give up if the tasks have not completed by then")
	flag.Parse()
	if c.workers < 1 || c.concurrency < 1 || c.tasks < 1 || c.keys < 1 || c.work < 0 || c.timeout <= 0 {
		fmt.Fprintln(os.Stderr, "asynqworkers: -workers, -concurrency, -tasks, -keys and -timeout must be positive")
		os.Exit(2)
	}
	ok, err := run(c, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "asynqworkers:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(c config, out io.Writer) (bool, error) {
	if c.addr == "" {
		embedded, err := lockkittest.StartServer()
		if err != nil {
			return false, err
		}
		defer embedded.Close()
		c.addr = embedded.Addr()
		fmt.Fprintln(out, "embedded Redis (miniredis) at", c.addr)
	}
	// A queue of our own, deleted at the end, so that a shared Redis keeps nothing of the run.
	var b [4]byte
	_, _ = rand.Read(b[:])
	queue := "asynqworkers-" + hex.EncodeToString(b[:])
	opts := &redis.Options{Addr: c.addr, DisableIdentity: true}

	rec := newRecorder(c.work, c.tasks, out)
	var busy atomic.Int64
	var failures atomic.Int64
	errh := asynq.ErrorHandlerFunc(func(_ context.Context, _ *asynq.Task, err error) {
		if errors.Is(err, asynqlock.ErrKeyBusy) {
			busy.Add(1)
		} else {
			failures.Add(1)
			fmt.Fprintln(os.Stderr, "task failed:", err)
		}
	})
	var servers []*asynq.Server
	defer func() {
		for _, s := range servers {
			s.Shutdown()
		}
	}()
	for range c.workers {
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		locks, err := core.New(rdb)
		if err != nil {
			return false, err
		}
		defer locks.Close(context.Background())
		mw, err := asynqlock.Middleware(locks, asynqlock.WithKey(asynqlock.ByJSONField("key")),
			asynqlock.WithTTL(100*time.Millisecond, 300*time.Millisecond)) // short: busy tasks retry sooner
		if err != nil {
			return false, err
		}
		srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
			Concurrency:              c.concurrency,
			Queues:                   map[string]int{queue: 1},
			TaskCheckInterval:        20 * time.Millisecond,
			DelayedTaskCheckInterval: 100 * time.Millisecond,
			IsFailure:                asynqlock.IsFailure(nil),
			RetryDelayFunc:           asynqlock.RetryDelayFunc(nil),
			ErrorHandler:             errh,
			LogLevel:                 asynq.ErrorLevel,
		})
		mux := asynq.NewServeMux()
		mux.Use(mw)
		mux.HandleFunc("work", rec.handle)
		if err := srv.Start(mux); err != nil {
			return false, err
		}
		servers = append(servers, srv)
	}

	rdb := redis.NewClient(opts)
	defer rdb.Close()
	start := time.Now()
	enq := asynq.NewClientFromRedisClient(rdb)
	for i := range c.tasks {
		payload := fmt.Sprintf(`{"key":"k%d","n":%d}`, i%c.keys, i)
		if _, err := enq.Enqueue(asynq.NewTask("work", []byte(payload)), asynq.Queue(queue),
			asynq.MaxRetry(1), asynq.Timeout(30*time.Second)); err != nil {
			return false, err
		}
	}
	select {
	case <-rec.done:
	case <-time.After(c.timeout):
	}
	elapsed := time.Since(start)
	for _, s := range servers {
		s.Shutdown()
	}
	servers = nil
	insp := asynq.NewInspectorFromRedisClient(rdb)
	_ = insp.DeleteQueue(queue, true)

	s := rec.check()
	fmt.Fprintf(out, "summary: tasks=%d completed=%d keys=%d overlaps=%d fence_out_of_order=%d busy_retries=%d retries_counted=%d failures=%d elapsed=%v\n",
		c.tasks, s.completed, s.keys, s.overlaps, s.fenceErrs, busy.Load(), s.retriesCounted, failures.Load(), elapsed.Round(time.Millisecond))
	return s.completed == c.tasks && s.overlaps == 0 && s.fenceErrs == 0, nil
}

// taskRun is one completed task as its handler saw it.
type taskRun struct {
	key, id    string
	start, end time.Time
	fence      int64
	retried    int
}

type recorder struct {
	work time.Duration
	want int
	out  io.Writer
	done chan struct{}
	mu   sync.Mutex
	runs []taskRun
}

func newRecorder(work time.Duration, want int, out io.Writer) *recorder {
	return &recorder{work: work, want: want, out: out, done: make(chan struct{})}
}

func (r *recorder) handle(ctx context.Context, _ *asynq.Task) error {
	start := time.Now()
	l, ok := core.FromContext(ctx)
	if !ok {
		return errors.New("no lock in the handler's context")
	}
	t := time.NewTimer(r.work) // the work done under the key's lock
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
	end := time.Now()
	id, _ := asynq.GetTaskID(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	key := strings.TrimPrefix(l.Name(), "@asynq/")
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, "key=%s task=%s start=%d end=%d fence=%d\n", key, id, start.UnixNano(), end.UnixNano(), l.Fence())
	r.runs = append(r.runs, taskRun{key: key, id: id, start: start, end: end, fence: l.Fence(), retried: retried})
	if len(r.runs) == r.want {
		close(r.done)
	}
	return nil
}

type stats struct{ completed, keys, overlaps, fenceErrs, retriesCounted int }

// check looks for overlapping runs of one key and fences out of start order.
func (r *recorder) check() stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	byKey := map[string][]taskRun{}
	s := stats{completed: len(r.runs)}
	for _, x := range r.runs {
		byKey[x.key] = append(byKey[x.key], x)
		s.retriesCounted += x.retried
	}
	s.keys = len(byKey)
	for _, rs := range byKey {
		sort.Slice(rs, func(i, j int) bool { return rs[i].start.Before(rs[j].start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].start.Before(rs[i-1].end) {
				s.overlaps++
			}
			if rs[i].fence <= rs[i-1].fence {
				s.fenceErrs++
			}
		}
	}
	return s
}
