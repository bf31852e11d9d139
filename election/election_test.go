package election_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

const childEnv = "LOCKKIT_ELECTION_CHILD"

func TestMain(m *testing.M) {
	if addr := os.Getenv(childEnv); addr != "" {
		if err := leaderChild(addr); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	locktest.VerifyTestMain(m)
}

// fencedWrite is a fenced store in Redis: a write is accepted only with a fence at least the
// highest seen, and accepted writes are logged.
var fencedWrite = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', 60000)
redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[2])
redis.call('PEXPIRE', KEYS[2], 60000)
return 1`)

func write(ctx context.Context, rdb redis.Scripter, fence int64, who string) (bool, error) {
	n, err := fencedWrite.Run(ctx, rdb, []string{"store:max", "store:log"}, fence, who).Int()
	return n == 1, err
}

// leaderChild campaigns, says "leader FENCE", then writes with its fence every 10ms, saying
// "ok" or "rejected" for each; when its term ends it says "lost CAUSE" and writes once more (a
// write already under way when the loss is noticed) before it exits.
func leaderChild(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		return err
	}
	defer locks.Close(ctx)
	el, err := election.New(locks, rdb, "scheduler", election.WithTTL(time.Second))
	if err != nil {
		return err
	}
	term, err := el.Campaign(ctx, "child")
	if err != nil {
		return err
	}
	fmt.Printf("leader %d\n", term.Fence())
	report := func() error {
		ok, err := write(ctx, rdb, term.Fence(), "child")
		if err != nil {
			return err
		}
		fmt.Println(map[bool]string{true: "ok", false: "rejected"}[ok])
		return nil
	}
	for {
		if err := report(); err != nil {
			return err
		}
		if term.Context().Err() != nil {
			fmt.Printf("lost %v\n", context.Cause(term.Context()))
			return report()
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A leader SIGSTOPped past its TTL loses leadership: another campaigner leads with a larger fence,
// the old leader's writes are rejected by the fenced store, its term's context ends with
// ErrLost, and observers see each leader with its fence.
func TestElection_stoppedLeaderIsDeposedAndFenced(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	locks := locktest.NewClient(t, rdb)
	el, err := election.New(locks, rdb, "scheduler", election.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	octx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	seen := el.Observe(octx)
	if first := <-seen; first != (election.Leader{}) {
		t.Fatalf("first observation %+v, want no leader", first)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+srv.Addr())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var childFence int64
	if l := <-lines; !strings.HasPrefix(l, "leader ") {
		t.Fatalf("child said %q", l)
	} else {
		childFence, _ = strconv.ParseInt(strings.TrimPrefix(l, "leader "), 10, 64)
	}
	if got := <-seen; got != (election.Leader{Value: "child", Fence: childFence}) {
		t.Fatalf("observed %+v, want the child with fence %d", got, childFence)
	}

	// Stop the leader: it cannot renew; its lock expires after its TTL and we lead.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	term, err := el.Campaign(ctx, "parent")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("parent leads %v after the child was stopped", time.Since(stopped).Round(time.Millisecond))
	if term.Fence() <= childFence {
		t.Fatalf("new fence %d not above the old leader's %d", term.Fence(), childFence)
	}
	if ok, err := write(ctx, rdb, term.Fence(), "parent"); err != nil || !ok {
		t.Fatalf("new leader's write: %v %v", ok, err)
	}
	for got := <-seen; got.Fence != term.Fence(); got = <-seen {
		if got.Fence != 0 {
			t.Fatalf("observed %+v before the new leader", got)
		}
	}

	// Resume the old leader: its late writes are rejected and its term ends as lost.
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var rejected int
	var lost string
	for l := range lines {
		switch {
		case l == "rejected":
			rejected++
		case strings.HasPrefix(l, "lost "):
			lost = l
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if lost == "" || !strings.Contains(lost, "lost (") || rejected == 0 {
		t.Fatalf("child: %q, %d rejected writes; want a loss and rejected writes", lost, rejected)
	}
	// Every accepted write of the old leader came before the new leader's first.
	log := rdb.LRange(ctx, "store:log", 0, -1).Val()
	parent := false
	for _, w := range log {
		if strings.HasSuffix(w, " parent") {
			parent = true
		} else if parent {
			t.Fatalf("old leader's write %q accepted after the new leader's: %q", w, log)
		}
	}
	if err := term.Context().Err(); err != nil {
		t.Fatalf("new leader's term ended: %v", context.Cause(term.Context()))
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != (election.Leader{}) {
		t.Fatalf("after resigning, observed %+v", got)
	}
}

// Followers are woken by the leader's resignation, in turn; each term's fence is larger.
func TestElection_resignWakesFollower(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A long backoff: only the release message can wake the follower promptly.
	a := locktest.NewClient(t, rdb)
	b := locktest.NewClient(t, rdb, core.WithRetryBackoff(5*time.Second, 10*time.Second))
	ea, _ := election.New(a, rdb, "e", election.WithTTL(5*time.Second))
	eb, _ := election.New(b, rdb, "e", election.WithTTL(5*time.Second))
	t1, err := ea.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if ld, err := eb.Leader(ctx); err != nil || ld != (election.Leader{Value: "a", Fence: t1.Fence()}) {
		t.Fatalf("Leader = %+v, %v", ld, err)
	}
	got := make(chan *election.Term, 1)
	go func() {
		t2, err := eb.Campaign(ctx, "b")
		if err != nil {
			t.Error(err)
		}
		got <- t2
	}()
	ch := locktest.Key("@election/e", "released")
	locktest.Eventually(t, 5*time.Second, "the follower subscribed", func() bool {
		return rdb.PubSubNumSub(ctx, ch).Val()[ch] == 1
	})
	resigned := time.Now()
	if err := t1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	t2 := <-got
	if t2 == nil {
		t.FailNow()
	}
	if d := time.Since(resigned); d > time.Second {
		t.Fatalf("follower took over %v after the resignation", d)
	}
	if t2.Fence() <= t1.Fence() || t2.Value() != "b" {
		t.Fatalf("term 2: fence %d (term 1 %d), value %q", t2.Fence(), t1.Fence(), t2.Value())
	}
	if !errors.Is(context.Cause(t1.Context()), core.ErrReleased) {
		t.Fatalf("term 1 cause %v", context.Cause(t1.Context()))
	}
	_ = t2.Resign(ctx)
	if _, err := election.New(a, rdb, ""); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("empty name: %v", err)
	}
}

// On a cluster the announcements and the release message travel by sharded pub/sub.
func TestElection_clusterObserve(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	el, err := election.New(locktest.NewClient(t, rdb), rdb, "c")
	if err != nil {
		t.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := el.Observe(octx)
	if got := <-seen; got != (election.Leader{}) {
		t.Fatalf("first: %+v", got)
	}
	term, err := el.Campaign(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != (election.Leader{Value: "one", Fence: term.Fence()}) {
		t.Fatalf("observed %+v, want one/%d", got, term.Fence())
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-seen:
		if got != (election.Leader{}) {
			t.Fatalf("after resigning: %+v", got)
		}
	case <-time.After(500 * time.Millisecond): // well within the 1s poll: the release message woke it
		t.Fatal("observer did not see the resignation promptly")
	}
}
