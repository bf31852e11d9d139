package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core/internal/script"
	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/redis/go-redis/v9"
)

// A lock's names cost one allocation, also for a name too long for the compiler's stack buffer
// of a concatenation, and are what docs/keys.md says; its key boxed once for the scripts
// (Keys.MainArg) is the second.
func TestKeys_init_oneAllocation(t *testing.T) {
	name := strings.Repeat("n", 40)
	var k store.Keys
	if n := testing.AllocsPerRun(100, func() { k.Init("lockkit:", name) }); n != 2 {
		t.Fatalf("keys.init allocates %v times, want 2", n)
	}
	if k.MainArg != any(k.Main) {
		t.Fatalf("MainArg %v, want the lock key", k.MainArg)
	}
	main := "lockkit:{" + name + "}"
	if k.Name != name || k.Main != main || k.Channel != main+":released" || k.Queue != main+":queue" ||
		k.Deadlines != main+":queue:deadlines" {
		t.Fatalf("keys %+v", k)
	}
	var p store.Keys
	p.InitSem("p:", "x", 3)
	if p.Main != "p:{x}:permits" || p.Channel != p.Main+":released" || p.Queue != p.Main+":queue" ||
		p.Deadlines != p.Main+":queue:deadlines" {
		t.Fatalf("semaphore keys %+v", p)
	}
}

// A fresh lock's names and its token cost one allocation between them (and the lock key boxed
// once, Keys.MainArg, a second).
func TestKeys_initNew_oneAllocation(t *testing.T) {
	name := strings.Repeat("n", 40)
	var k store.Keys
	var token string
	if n := testing.AllocsPerRun(100, func() { token = k.InitNew("lockkit:", name) }); n != 2+raceExtra {
		t.Fatalf("keys.InitNew allocates %v times, want %d", n, 2+raceExtra)
	}
	main := "lockkit:{" + name + "}"
	if k.Name != name || k.Main != main || k.Channel != main+":released" || k.Queue != main+":queue" ||
		k.Deadlines != main+":queue:deadlines" || len(token) != 32 || strings.Trim(token, "0123456789abcdef") != "" {
		t.Fatalf("keys %+v, token %q", k, token)
	}
	if other := k.InitNew("lockkit:", name); other == token {
		t.Fatalf("two tokens %q", token)
	}
}

// A lone caller's lock + unlock (issue #38): lockkit's own allocations, counted without a server
// (the replies given at once, as in BenchmarkOverhead_lockUnlock). Six: the Lock, its token
// boxed for the scripts, its keys and token (one string), the lock key boxed once for the acquire
// and the release call (Keys.MainArg), and go-redis's two Cmds. Against a server go-redis adds 7
// more (its pool's health check of the connection, 3 per command, and the fence reply boxed): 13
// in BenchmarkLockUnlock/impl=lockkit/g=1.
func TestLockUnlock_loneCallerAllocations(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer func() { _ = rdb.Close() }()
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	c.evict.close() // (its INFO would dial 127.0.0.1:1 in the background, allocating meanwhile)
	set := script.Scripts()
	c.st.(*store.Node).SetRunner(script.NewSender(&instantRunner{acquire: ScriptSHA1(set.Acquire.Source),
		release: ScriptSHA1(set.Release.Source)}))
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		l, err := c.Acquire(ctx, "lone", 8*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}); n != 6+raceExtra {
		t.Fatalf("a lock + unlock allocates %v times, want %d", n, 6+raceExtra)
	}
}

// A release that succeeded costs finish nothing (errors.As's target escapes to the heap: it is
// asked only about a failed release).
func TestLock_finish_successAllocatesNothing(t *testing.T) {
	l := &Lock{c: &Client{}}
	if n := testing.AllocsPerRun(100, func() {
		if err := l.finish(stateReleased, true, 0, nil); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("finish of a successful release allocates %v times, want 0", n)
	}
}
