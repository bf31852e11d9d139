// Command worker is one side of the mixed-version check (`make compat`): it takes every kind of
// hold of lockkit on a few shared names, as fast as it can, and prints one JSON line per
// attempt on stdout (an Event of package compat). It uses only core's public API that existed at
// the baseline, because scripts/compat.sh builds this very file twice: once against the working
// tree and once inside an extracted copy of the baseline commit, where it does not exist (it is
// copied there as a package of that tree's root module).
//
// It must stay self-contained: the standard library, go-redis and core only. Its line format is
// decoded by the parent (compat.Event): keep the two in step.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// kinds are the kinds of hold the worker takes, by the names the parent's table uses.
var kinds = []string{"lock", "fair", "read", "write", "permits", "set", "reentry"}

// event is one attempt, as compat.Event decodes it. Times are Unix nanoseconds of this host's
// clock, which the other worker shares (both run on one host).
type event struct {
	Worker string   `json:"w"`
	Kind   string   `json:"kind"`
	Names  []string `json:"names"`
	Limit  int      `json:"limit,omitempty"`
	Call   int64    `json:"call"`
	Got    int64    `json:"got,omitempty"`
	End    int64    `json:"end,omitempty"`
	Lost   string   `json:"lost,omitempty"`
	Err    string   `json:"err,omitempty"`
	Busy   bool     `json:"busy,omitempty"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "the Redis server")
	name := flag.String("name", "worker", "this worker's name in the events (base, head)")
	dur := flag.Duration("duration", 10*time.Second, "how long to take holds at most")
	eof := flag.Bool("eof", false, "stop earlier, when stdin ends (the parent closes it once it has seen enough); "+
		"a line \"kinds a,b\" on stdin narrows the kinds taken from then on to those (the parent steers to pairs not yet met)")
	workers := flag.Int("g", 4, "goroutines taking holds")
	names := flag.Int("names", 3, "shared lock names (compat-0 ...)")
	seed := flag.Uint64("seed", 1, "seed of the random choices")
	flag.Parse()
	stop := make(chan struct{})
	var only atomic.Pointer[[]string]
	if *eof {
		go func() {
			steer(os.Stdin, &only)
			close(stop)
		}()
	}
	if err := run(*addr, *name, *dur, stop, &only, *workers, *names, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// steer reads the parent's lines until stdin ends: "kinds a,b" narrows the kinds taken to a and b
// (kinds this worker knows; an empty or unknown list leaves every kind).
func steer(in *os.File, only *atomic.Pointer[[]string]) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		list, ok := strings.CutPrefix(sc.Text(), "kinds ")
		if !ok {
			continue
		}
		var ks []string
		for k := range strings.SplitSeq(list, ",") {
			if slices.Contains(kinds, k) {
				ks = append(ks, k)
			}
		}
		if len(ks) == 0 {
			ks = kinds
		}
		only.Store(&ks)
	}
}

func run(addr, name string, dur time.Duration, stop <-chan struct{}, only *atomic.Pointer[[]string], workers, names int,
	seed uint64) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4 * workers})
	defer func() { _ = rdb.Close() }()
	locks, err := core.New(rdb, core.WithLabel("compat-"+name))
	if err != nil {
		return err
	}
	defer func() { _ = locks.Close(context.Background()) }()
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(e event) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	for g := range workers {
		r := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Go(func() {
			for time.Now().Before(end) && !stopped(stop) {
				ks := kinds
				if p := only.Load(); p != nil {
					ks = *p
				}
				e := attempt(locks, r, ks, names)
				e.Worker = name
				emit(e)
			}
		})
	}
	wg.Wait()
	return nil
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// now is this host's clock, shared with the other worker.
func now() int64 { return time.Now().UnixNano() }

// attempt takes one hold of a random kind of ks on random shared names, holds it a few
// milliseconds (a re-entry enters it once more and gives that hold back first) and releases it.
func attempt(locks *core.Client, r *rand.Rand, ks []string, names int) event {
	e := event{Kind: ks[r.IntN(len(ks))]}
	pick := func() string { return fmt.Sprintf("compat-%d", r.IntN(names)) }
	e.Names = []string{pick()}
	const ttl = 5 * time.Second
	var opts []core.AcquireOption
	switch e.Kind {
	case "fair":
		opts = append(opts, core.Fair())
	case "read":
		opts = append(opts, core.Read())
	case "write":
		opts = append(opts, core.Write())
	case "permits":
		e.Limit = 2 + r.IntN(2)
		opts = append(opts, core.Permits(e.Limit))
	case "set":
		for len(e.Names) < 2 {
			if n := pick(); n != e.Names[0] {
				e.Names = append(e.Names, n)
			}
		}
		sort.Strings(e.Names)
	}
	// A hold's context is a child of its acquisition's: the wait is bounded by WithWait, not by
	// a deadline that would end the hold.
	ctx := context.Background()
	opts = append(opts, core.WithWait(500*time.Millisecond))
	hold := time.Duration(2+r.IntN(20)) * time.Millisecond
	e.Call = now()
	if e.Kind == "set" {
		s, err := locks.AcquireAll(ctx, e.Names, ttl, opts...)
		if e.failed(err) {
			return e
		}
		e.held(s.Context(), hold, nil)
		_ = s.Release(context.Background())
		return e
	}
	l, err := locks.Acquire(ctx, e.Names[0], ttl, opts...)
	if e.failed(err) {
		return e
	}
	var inner func()
	if e.Kind == "reentry" {
		inner = func() {
			in, err := locks.Acquire(l.Context(), e.Names[0], ttl)
			if err != nil {
				e.Err = "re-entry: " + err.Error()
				return
			}
			_ = in.Release(context.Background())
		}
	}
	e.held(l.Context(), hold, inner)
	_ = l.Release(context.Background())
	return e
}

// failed records err: a wait that ran out (the name stayed taken) is busy, anything else an error.
func (e *event) failed(err error) bool {
	switch {
	case err == nil:
		e.Got = now()
		return false
	case errors.Is(err, core.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded):
		e.Busy = true
	default:
		e.Err = err.Error()
	}
	return true
}

// held keeps the hold for d (entering it once more, and giving that back, first when inner is
// set), or until its context ends, and records when that was, before the hold is released.
func (e *event) held(ctx context.Context, d time.Duration, inner func()) {
	if inner != nil {
		inner()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		e.Lost = context.Cause(ctx).Error()
	}
	e.End = now()
}
