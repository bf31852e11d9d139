package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// watch reports, in order: the lock's state, an acquisition, a waiting process, a release handed
// to the waiter, the waiter's subscription ending, a forced release, a release with nobody
// waiting, a read hold released, and a holder that stopped renewing (expired); each event about a
// holder shows its mode and fence; it stops on SIGINT with exit code 0.
func TestCLI_watch(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	a := locktest.NewClient(t, rdb, core.WithLabel("a"))
	b := locktest.NewClient(t, rdb, core.WithLabel("b"))
	s := newSession(t, bin)

	cmd := exec.Command(bin, "watch", "--url", "redis://"+srv.Addr(), "jobs:nightly")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var transcript []string
	expect := func(event string) {
		t.Helper()
		select {
		case l := <-lines:
			transcript = append(transcript, l)
			if f := strings.Fields(l); len(f) < 2 || f[1] != event {
				t.Fatalf("watch said %q, want a %q event; so far:\n%s", l, event, strings.Join(transcript, "\n"))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q event; so far:\n%s", event, strings.Join(transcript, "\n"))
		}
	}
	expect("state")

	la, err := a.Acquire(ctx, "jobs:nightly", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.maskLock(la, "a")
	expect("acquired")
	got := make(chan *core.Lock, 1)
	go func() {
		lb, err := b.Acquire(ctx, "jobs:nightly", 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	expect("waiting")
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expect("released")
	lb := <-got
	if lb == nil {
		t.FailNow()
	}
	s.maskLock(lb, "b")
	expect("handoff")
	expect("waiting") // b's idle subscription ends (3s after its wait)
	if ok, err := a.ForceRelease(ctx, "jobs:nightly"); err != nil || !ok {
		t.Fatalf("ForceRelease: %v %v", ok, err)
	}
	expect("force-released")
	expect("free")
	// A release with nobody waiting publishes nothing: the free value it leaves tells it from an
	// expiry (it said "expired").
	la, err = a.Acquire(ctx, "jobs:nightly", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.maskLock(la, "a2")
	expect("acquired")
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expect("released")
	expect("free")
	// A read hold, released before its lease ran out.
	lr, err := b.Acquire(ctx, "jobs:nightly", 10*time.Second, core.Read())
	if err != nil {
		t.Fatal(err)
	}
	s.maskLock(lr, "reader")
	expect("acquired")
	if err := lr.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expect("released")
	expect("free")
	// A holder that stops renewing: its lock expires without a release.
	rdb.Set(ctx, locktest.Key("jobs:nightly"), "dead-holder-token\x00777\x00h\x000\x020000000000000000\x00\x00\x00", 0) // see core/internal/script/lua/lock.lua
	rdb.PExpire(ctx, locktest.Key("jobs:nightly"), 300*time.Millisecond)
	s.mask("37faf73a2fd4", "dead-digest")
	expect("acquired")
	expect("expired")
	expect("free")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		t.Fatalf("watch said %q after the last event", l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch exited with %v, want 0 on SIGINT", err)
	}
	fmt.Fprintf(&s.script, "$ lockkit watch jobs:nightly\n%s\n", s.clean(strings.Join(transcript, "\n")))
	s.golden("watch")
}

// watch's first line is the name's state with its waiters (a holder and the process waiting for
// it; or free, "free":true in JSON), and another watch of the name is not a waiting process (#47:
// a watch printed "waiting queued=0 processes=3" before anyone held or waited, and its JSON state
// event of a free name did not say free).
func TestCLI_watch_firstLineAndOtherWatches(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	url := "redis://" + srv.Addr()
	a, b := locktest.NewClient(t, rdb), locktest.NewClient(t, rdb)
	acquire(t, a, ctx, "held")
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = b.Acquire(wctx, "held", time.Minute)
	}()
	defer func() { stop(); <-done }()
	locktest.Eventually(t, 5*time.Second, "b waiting", func() bool {
		n, err := rdb.PubSubNumSub(ctx, "lockkit:{held}:released").Result()
		return err == nil && n["lockkit:{held}:released"] == 1
	})
	out, err := exec.Command(bin, "watch", "--url", url, "--for", "1s", "held").Output()
	if first, _, _ := strings.Cut(string(out), "\n"); err != nil || !regexp.MustCompile(`^\S+ state mode=lock .* queued=0 processes=1$`).MatchString(first) {
		t.Errorf("lockkit watch held: %v, first line %q, want the holder and processes=1:\n%s", err, first, out)
	}

	// Two watches of a free name: each says it is free, and neither counts the other.
	first := exec.Command(bin, "watch", "--url", url, "--for", "3s", "free")
	var firstOut strings.Builder
	first.Stdout = &firstOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "watch", "--json", "--url", url, "--for", "2s", "free").Output()
	var ev map[string]any
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &ev); err != nil || jerr != nil ||
		ev["event"] != "state" || ev["free"] != true || ev["subscribed_processes"] != 0.0 {
		t.Errorf("lockkit watch --json free: %v %v, want one line, a state event with free true and no process waiting:\n%s", err, jerr, out)
	}
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\S+ state free queued=0 processes=0\n$`).MatchString(firstOut.String()) {
		t.Errorf("lockkit watch free, with another watch of it: want one line, free, nobody waiting:\n%s", firstOut.String())
	}
}
