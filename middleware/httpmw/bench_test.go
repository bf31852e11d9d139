package httpmw_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/middleware/httpmw"
)

// sink is a ResponseWriter that keeps nothing, so that benchmarks measure the middleware.
type sink struct {
	h    http.Header
	code int
}

func (s *sink) Header() http.Header         { return s.h }
func (s *sink) Write(p []byte) (int, error) { return len(p), nil }
func (s *sink) WriteHeader(code int)        { s.code = code }

func (s *sink) reset() { clear(s.h); s.code = 0 }

var noop = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// keyed returns a POST request whose Idempotency-Key can be changed in place: *key = "...".
func keyed() (*http.Request, *string) {
	r := httptest.NewRequest("POST", "/orders", nil)
	r.Header["Idempotency-Key"] = []string{""}
	return r, &r.Header["Idempotency-Key"][0]
}

// BenchmarkRoundTrips counts the Lua calls Redis runs per request (EVALSHA + EVAL): want 2 for a
// first request, 1 for a replay, 1 for a duplicate in flight, and 2 for an uncontended KeyLock.
func BenchmarkRoundTrips(b *testing.B) {
	srv := redistest.Start(b)
	locks := locktest.NewClient(b, srv.Client(b))
	mw := httpmw.Idempotency(locks)(noop)
	w := &sink{h: http.Header{}}
	r, key := keyed()
	round := 0 // the testing package calls each benchmark function more than once
	run := func(b *testing.B, next func(i int) string, want int) {
		round++
		*key = "warm-up"
		mw.ServeHTTP(w, r) // loads the scripts
		srv.ResetStats(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			*key = next(i)
			w.reset()
			mw.ServeHTTP(w, r)
			if w.code != want {
				b.Fatalf("status %d, want %d", w.code, want)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(roundTrips(b, srv))/float64(b.N), "roundtrips/op")
	}
	b.Run("idempotency/first", func(b *testing.B) {
		// The handler writes nothing: net/http would answer 200 itself.
		run(b, func(i int) string { return strconv.Itoa(round) + "/first-" + strconv.Itoa(i) }, 0)
	})
	b.Run("idempotency/replay", func(b *testing.B) {
		*key = "replayed"
		mw.ServeHTTP(w, r)
		run(b, func(int) string { return "replayed" }, http.StatusOK)
	})
	b.Run("idempotency/duplicate", func(b *testing.B) {
		entered, release := make(chan struct{}), make(chan struct{})
		slow := httpmw.Idempotency(locks)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			close(entered)
			<-release
		}))
		done := make(chan struct{})
		k := "in-flight-" + strconv.Itoa(round)
		go func() {
			r, _ := keyed()
			r.Header.Set("Idempotency-Key", k)
			slow.ServeHTTP(&sink{h: http.Header{}}, r)
			close(done)
		}()
		<-entered
		run(b, func(int) string { return k }, http.StatusConflict)
		close(release)
		<-done
	})
	b.Run("keylock", func(b *testing.B) {
		mw := httpmw.KeyLock(locks, httpmw.ByPathValue("id"))(noop)
		r := httptest.NewRequest("PUT", "/orders/1", nil)
		r.SetPathValue("id", "order/1")
		mw.ServeHTTP(w, r)
		srv.ResetStats(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			mw.ServeHTTP(w, r)
		}
		b.StopTimer()
		b.ReportMetric(float64(roundTrips(b, srv))/float64(b.N), "roundtrips/op")
	})
}

// measure alternates blocks of mw and direct calls (so that both see the same Redis conditions)
// and reports the middleware's own time and allocations per request: mw minus direct, where direct
// makes the same core calls the middleware makes.
func measure(b *testing.B, mw, direct func(i int)) {
	const block = 50
	var mwT, coreT time.Duration
	var mwA, coreA uint64
	var ms runtime.MemStats
	phase := func(f func(int), from, to int, t *time.Duration, a *uint64) {
		runtime.ReadMemStats(&ms)
		m0, t0 := ms.Mallocs, time.Now()
		for i := from; i < to; i++ {
			f(i)
		}
		*t += time.Since(t0)
		runtime.ReadMemStats(&ms)
		*a += ms.Mallocs - m0
	}
	b.ResetTimer()
	for from := 0; from < b.N; from += block {
		to := min(from+block, b.N)
		phase(mw, from, to, &mwT, &mwA)
		phase(direct, from, to, &coreT, &coreA)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(mwT.Nanoseconds())/n, "mw-ns/op")
	b.ReportMetric(float64(coreT.Nanoseconds())/n, "core-ns/op")
	b.ReportMetric(float64((mwT-coreT).Nanoseconds())/n, "overhead-ns/op")
	b.ReportMetric(float64(mwA)/n-float64(coreA)/n, "overhead-allocs/op")
}

// BenchmarkOverhead measures what the middlewares add to the core calls they make, on a no-op
// handler: target at most 20µs and 40 allocations per request. Reported metrics: mw-ns/op (the
// middleware, Redis included), core-ns/op (the same core calls made directly), overhead-ns/op and
// overhead-allocs/op (their difference). ns/op and allocs/op cover both halves and mean nothing.
func BenchmarkOverhead(b *testing.B) {
	srv := redistest.Start(b)
	locks := locktest.NewClient(b, srv.Client(b))
	ctx := context.Background()
	w := &sink{h: http.Header{}}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	record := make([]byte, 40) // about what the middleware stores for an empty 200
	round := 0                 // the testing package calls each benchmark function more than once
	b.Run("idempotency/first", func(b *testing.B) {
		mw := httpmw.Idempotency(locks)(noop)
		r, key := keyed()
		round++
		keys := make([]string, b.N)
		names, guards := make([]string, b.N), make([]string, b.N)
		for i := range b.N {
			keys[i] = strconv.Itoa(round) + "/k" + strconv.Itoa(i)
			names[i] = "bench/" + keys[i]
			guards[i] = "lockkit:idem:{" + names[i] + "}"
		}
		measure(b, func(i int) {
			*key = keys[i]
			w.reset()
			mw.ServeHTTP(w, r)
		}, func(i int) {
			l, err := locks.TryAcquire(ctx, names[i], 10*time.Second, core.WithGuard(guards[i]))
			must(err)
			must(l.ReleaseSet(ctx, guards[i], record, 24*time.Hour))
		})
	})
	b.Run("idempotency/replay", func(b *testing.B) {
		mw := httpmw.Idempotency(locks)(noop)
		r, key := keyed()
		*key = "replayed"
		mw.ServeHTTP(w, r)
		l, err := locks.TryAcquire(ctx, "bench/replayed", 10*time.Second)
		must(err)
		must(l.ReleaseSet(ctx, "lockkit:idem:{bench/replayed}", record, time.Hour))
		measure(b, func(int) {
			w.reset()
			mw.ServeHTTP(w, r)
		}, func(int) {
			_, err := locks.TryAcquire(ctx, "bench/replayed", 10*time.Second, core.WithGuard("lockkit:idem:{bench/replayed}"))
			if !errors.Is(err, core.ErrGuarded) {
				b.Fatal(err)
			}
		})
	})
	b.Run("keylock", func(b *testing.B) {
		mw := httpmw.KeyLock(locks, httpmw.ByPathValue("id"))(noop)
		r := httptest.NewRequest("PUT", "/orders/1", nil)
		r.SetPathValue("id", "order/1")
		measure(b, func(int) {
			mw.ServeHTTP(w, r)
		}, func(int) {
			l, err := locks.Acquire(ctx, "order/2", 10*time.Second, core.WithWait(5*time.Second))
			must(err)
			must(l.Release(ctx))
		})
	})
}

// BenchmarkMemory_storedRecord reports the Redis memory one stored idempotency record costs, for a
// 201 with a 64-byte JSON body and a Content-Type: B/request-fresh right after the requests (the
// record plus what each request leaves for a few seconds: its lock's fence counter and release
// receipt), and B/record once those expired (the record alone, kept for the retention).
func BenchmarkMemory_storedRecord(b *testing.B) {
	srv := redistest.Start(b)
	locks := locktest.NewClient(b, srv.Client(b))
	body := []byte(`{"id":"ord_0000000000000042","status":"created","amount":1999}   `)
	mw := httpmw.Idempotency(locks)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	w := &sink{h: http.Header{}}
	r, key := keyed()
	info := func() int64 {
		s, _ := srv.Do(b, "INFO", "memory").(string)
		for _, line := range strings.Split(s, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		b.Fatal("no used_memory")
		return 0
	}
	before := info()
	b.ResetTimer()
	for i := range b.N {
		*key = "key-" + strconv.Itoa(1_000_000_000+i)
		w.reset()
		mw.ServeHTTP(w, r)
		if w.code != http.StatusCreated {
			b.Fatalf("status %d", w.code)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(info()-before)/float64(b.N), "B/request-fresh")
	rdb := srv.Client(b)
	deadline := time.Now().Add(20 * time.Second)
	for rdb.DBSize(context.Background()).Val() > int64(b.N) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // the counters and receipts expire on their own
	}
	b.ReportMetric(float64(info()-before)/float64(b.N), "B/record")
}
