package election_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Three clients run 60 short terms (up to 1.5 ms each, each client pausing up to 10 ms before it
// campaigns again, so that there are vacancies too) while an observer 2 ms from Redis (through
// a delay proxy) watches. Its subscription stays healthy throughout, so it reports every term a
// campaigner got, with the value it campaigned with; its leader reports have strictly increasing
// fences; and each vacancy it reports comes after the term it follows has ended (its leader had
// begun to resign: the leadership TTL is long, so no term ends otherwise). The observer runs with
// RESP2 and RESP3 (they answer its PING differently).
func TestObserve_shortTermsInFenceOrder(t *testing.T) {
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", protocol), func(t *testing.T) { testShortTerms(t, protocol) })
	}
}

func testShortTerms(t *testing.T, protocol int) {
	const clients, terms = 3, 60
	srv := redistest.Start(t)
	proxy := srv.StartDelayProxy(t, 2*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	opt := proxy.Options()
	opt.Protocol = protocol
	ordb := redis.NewClient(opt)
	t.Cleanup(func() { _ = ordb.Close() })
	observer, err := election.New(locktest.NewClient(t, ordb), ordb, "short")
	if err != nil {
		t.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	seen := observer.Observe(octx)
	defer func() {
		stop()
		for range seen { // until the observer has returned
		}
	}()
	if first := <-seen; first != (election.Leader{}) {
		t.Fatalf("first report %+v, want no leader", first)
	}

	var (
		mu     sync.Mutex
		got    = map[int64]string{} // fence → value of each term a campaigner got
		ending sync.Map             // fence → struct{}: that term's leader has begun to resign
		n      atomic.Int64
		wg     sync.WaitGroup
	)
	for i := range clients {
		rdb := srv.Client(t)
		el, err := election.New(locktest.NewClient(t, rdb), rdb, "short")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			value := fmt.Sprintf("c%d", i)
			for n.Add(1) <= terms {
				term, err := el.Campaign(ctx, value)
				if err != nil {
					t.Errorf("campaign: %v", err)
					return
				}
				mu.Lock()
				got[term.Fence()] = value
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond) // the leader's work
				ending.Store(term.Fence(), struct{}{})
				if err := term.Resign(ctx); err != nil {
					t.Errorf("resign: %v", err)
					return
				}
				time.Sleep(time.Duration(rand.IntN(10000)) * time.Microsecond) // often nobody campaigns
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// Collect reports until the campaigns are over and the observer has reported the vacancy after
	// the last term (or 10 s after they are over, when that vacancy never comes).
	var (
		reports     []election.Leader
		last        election.Leader // the last report
		earlyVacant []int64         // fences of terms followed by a vacancy while they were live
	)
	var over <-chan time.Time
	lastFence := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		var top int64
		for f := range got {
			top = max(top, f)
		}
		return top
	}
	finished := func() bool { // the last report is the vacancy after the last term
		k := len(reports)
		return k >= 2 && reports[k-1] == (election.Leader{}) && reports[k-2].Fence == lastFence()
	}
collect:
	for {
		select {
		case <-done:
			done, over = nil, time.After(10*time.Second)
			if finished() {
				break collect
			}
		case <-over:
			t.Errorf("no vacancy reported after the last term (fence %d) 10s after the campaigns ended", lastFence())
			break collect
		case ld := <-seen:
			if ld == (election.Leader{}) && last != (election.Leader{}) {
				if _, ok := ending.Load(last.Fence); !ok {
					earlyVacant = append(earlyVacant, last.Fence)
				}
			}
			reports = append(reports, ld)
			last = ld
			if done == nil && finished() {
				break collect
			}
		}
	}
	wg.Wait()

	var (
		top        int64
		leaders    int
		outOfOrder []string
		reported   = map[int64]bool{}
	)
	for i, ld := range reports {
		if ld == (election.Leader{}) {
			continue
		}
		leaders++
		if ld.Fence <= top {
			outOfOrder = append(outOfOrder, fmt.Sprintf("#%d: fence %d after %d", i+1, ld.Fence, top))
		}
		top = max(top, ld.Fence)
		if v, ok := got[ld.Fence]; !ok || v != ld.Value {
			t.Errorf("report #%d %+v: no campaigner got that term (value %q)", i+1, ld, v)
		}
		reported[ld.Fence] = true
	}
	var missed []int64
	for f := range got {
		if !reported[f] {
			missed = append(missed, f)
		}
	}
	t.Logf("%d terms; %d reports (%d leaders): %d out of order, %d terms missed, %d vacancies while the term was live",
		len(got), len(reports)+1, leaders, len(outOfOrder), len(missed), len(earlyVacant))
	if len(got) != terms {
		t.Errorf("campaigners got %d terms, want %d", len(got), terms)
	}
	if len(outOfOrder) > 0 {
		t.Errorf("%d leader reports not above the highest fence before them: %v", len(outOfOrder), outOfOrder)
	}
	if len(missed) > 0 {
		t.Errorf("%d terms never reported: fences %v", len(missed), missed)
	}
	if len(earlyVacant) > 0 {
		t.Errorf("vacancy reported while the term before it was live: fences %v", earlyVacant)
	}
}

// The subscription of an observer 2 ms from Redis is killed every 10 ms while three clients run
// 40 short terms: it may miss terms meanwhile, but its leader reports keep increasing and name
// terms a campaigner got. Once the subscription stays up, it reports the current leader, then the
// vacancy after it.
func TestObserve_subscriptionKilled(t *testing.T) {
	const clients, terms = 3, 40
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	opt := srv.StartDelayProxy(t, 2*time.Millisecond).Options()
	opt.ClientName = "observer"
	ordb := redis.NewClient(opt)
	t.Cleanup(func() { _ = ordb.Close() })
	observer, err := election.New(locktest.NewClient(t, ordb), ordb, "killed")
	if err != nil {
		t.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	seen := observer.Observe(octx)
	var (
		mu      sync.Mutex
		reports []election.Leader
		got     = map[int64]string{}
	)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for ld := range seen {
			mu.Lock()
			reports = append(reports, ld)
			mu.Unlock()
		}
	}()
	defer func() { stop(); <-collected }()
	last := func() (election.Leader, int) {
		mu.Lock()
		defer mu.Unlock()
		if len(reports) == 0 {
			return election.Leader{Fence: -1}, 0
		}
		return reports[len(reports)-1], len(reports)
	}
	locktest.Eventually(t, 5*time.Second, "the first report", func() bool { _, n := last(); return n > 0 })

	// The killer: every 10 ms, the observer's subscription connection.
	admin := redis.NewClient(srv.AdminOptions())
	defer admin.Close()
	var kills atomic.Int64
	killing, killed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(killed)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-killing:
				return
			case <-tick.C:
			}
			list, err := admin.ClientList(ctx).Result()
			if err != nil {
				t.Errorf("client list: %v", err)
				return
			}
			for _, line := range strings.Split(list, "\n") {
				f := map[string]string{}
				for _, kv := range strings.Fields(line) {
					k, v, _ := strings.Cut(kv, "=")
					f[k] = v
				}
				if f["name"] == "observer" && strings.Contains(f["flags"], "P") {
					if n, err := admin.ClientKillByFilter(ctx, "ID", f["id"]).Result(); err == nil && n == 1 {
						kills.Add(1)
					}
				}
			}
		}
	}()

	var n atomic.Int64
	var wg sync.WaitGroup
	campaigners := make([]*election.Election, clients)
	for i := range campaigners {
		rdb := srv.Client(t)
		if campaigners[i], err = election.New(locktest.NewClient(t, rdb), rdb, "killed"); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			value := fmt.Sprintf("c%d", i)
			for n.Add(1) <= terms {
				term, err := campaigners[i].Campaign(ctx, value)
				if err != nil {
					t.Errorf("campaign: %v", err)
					return
				}
				mu.Lock()
				got[term.Fence()] = value
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // the leader's work
				if err := term.Resign(ctx); err != nil {
					t.Errorf("resign: %v", err)
					return
				}
				time.Sleep(time.Duration(rand.IntN(10000)) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	close(killing)
	<-killed
	if kills.Load() == 0 {
		t.Fatal("the observer's subscription was never killed")
	}

	term, err := campaigners[0].Campaign(ctx, "final")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got[term.Fence()] = "final"
	mu.Unlock()
	want := election.Leader{Value: "final", Fence: term.Fence()}
	locktest.Eventually(t, 5*time.Second, "the final leader's report", func() bool { l, _ := last(); return l == want })
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	locktest.Eventually(t, 5*time.Second, "the vacancy after the final term", func() bool {
		l, _ := last()
		return l == (election.Leader{})
	})

	mu.Lock()
	defer mu.Unlock()
	var top int64
	leaders := 0
	for i, ld := range reports {
		if ld == (election.Leader{}) {
			continue
		}
		leaders++
		if ld.Fence <= top {
			t.Errorf("report #%d: fence %d after %d", i+1, ld.Fence, top)
		}
		top = ld.Fence
		if got[ld.Fence] != ld.Value {
			t.Errorf("report #%d %+v: no campaigner got that term", i+1, ld)
		}
	}
	t.Logf("%d kills; %d terms, %d reports (%d leaders)", kills.Load(), len(got), len(reports), leaders)
}
