package core_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
}

func ExampleClient_Do() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	defer locks.Close(ctx)

	// Wait for the lock (woken by the release), run the work under it, release it.
	err := locks.Do(ctx, "invoice:42", 10*time.Second, func(ctx context.Context) error {
		l, _ := core.FromContext(ctx)
		// ctx is cancelled if the lock is lost; pass the fence to the store.
		return saveInvoice(ctx, 42, l.Fence())
	})
	switch {
	case errors.Is(err, core.ErrLost):
		log.Print("the lock was lost while the work ran; it may have to be redone")
	case err != nil:
		log.Print(err)
	}
}

func saveInvoice(context.Context, int, int64) error { return nil }

func ExampleClient_Acquire() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))

	l, err := locks.Acquire(ctx, "report:daily", 30*time.Second)
	if errors.Is(err, core.ErrNotAcquired) {
		log.Print("still held by someone else after 5s")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	// The watchdog renews the lock every 10s while it is held. Work under l.Context().
	fmt.Println(l.Name(), l.Fence() > 0)
}

func ExampleClient_TryAcquire() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))

	l, err := locks.TryAcquire(ctx, "sync:tenant-7", time.Minute)
	var busy *core.NotAcquiredError
	if errors.As(err, &busy) {
		log.Printf("busy; try again in %v", busy.RetryAfter)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
}

func ExampleLock_Context() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	l, err := locks.Acquire(ctx, "migration", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)

	select {
	case <-l.Context().Done():
		// Released, lost or closed: context.Cause says which.
		var lost *core.LostError
		if errors.As(context.Cause(l.Context()), &lost) {
			log.Printf("lock lost (%s): stop writing", lost.Reason)
		}
	case <-time.After(time.Second):
		// Work done under the lock.
	}
}

func ExampleWithOwner() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	l, err := locks.Acquire(ctx, "order:9", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)

	// Another process that was handed the token re-enters the lock instead of waiting for it.
	token := l.Token()
	other, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	in, err := other.TryAcquire(ctx, "order:9", time.Minute, core.WithOwner(token))
	if err != nil {
		log.Fatal(err)
	}
	defer in.Release(ctx)
	fmt.Println(in.Holds() > 1, in.Fence() == l.Fence())
}

func ExampleWithToken() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	// A task delivered twice (at-least-once queues do that) takes its lock under a token derived
	// from the task ID: the second delivery re-enters the first one's lock instead of waiting for
	// it, and a delivery after the first one's lock ended takes it afresh.
	taskID := "6f1c2e9a"
	l, err := locks.Acquire(ctx, "invoice:7", time.Minute, core.WithToken("task:"+taskID))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	again, err := locks.Acquire(ctx, "invoice:7", time.Minute, core.WithToken("task:"+taskID))
	if err != nil {
		log.Fatal(err)
	}
	defer again.Release(ctx)
	fmt.Println(l.Holds() > 1, again.Holds() > 1)
}

func ExampleWithGuard() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	const name = "payout:2026-11-21"
	result := locks.Prefix() + "result:{" + name + "}" // carries the lock's hash tag

	l, err := locks.TryAcquire(ctx, name, time.Minute, core.WithGuard(result))
	var done *core.GuardedError
	if errors.As(err, &done) {
		fmt.Println("already done:", done.Value)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	// ... do the work once ...
	// Store the result and release, atomically and only if the lock is still ours.
	if err := l.ReleaseSet(ctx, result, []byte("paid 3 invoices"), 24*time.Hour); err != nil {
		log.Fatal(err)
	}
}

func ExampleFair() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	// Waiters in every process are served in arrival order.
	l, err := locks.Acquire(ctx, "printer", 10*time.Second, core.Fair(), core.WithWait(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
}

func ExampleNewRedlock() {
	var nodes []redis.UniversalClient
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"} {
		nodes = append(nodes, redis.NewClient(&redis.Options{
			Addr:                  addr,
			ContextTimeoutEnabled: true, // let per-node timeouts reach the socket
			MaxRetries:            -1,
		}))
	}
	locks, err := core.NewRedlock(nodes, core.WithNodeTimeout(50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
}

func ExampleNew_cluster() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"node-1:6379", "node-2:6379", "node-3:6379"}})
	// Every key of a lock shares a slot; wake-ups use sharded pub/sub. WithReplicaAck narrows the
	// failover window: an acquisition counts only once a replica has it.
	locks, err := core.New(rdb, core.WithReplicaAck(1, 50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
}

func ExampleHook() {
	hook := core.Hook{
		WaitDone: func(ctx context.Context, w core.WaitInfo) {
			log.Printf("lock %s: %s after %v (%d attempts)", w.Name, w.Outcome, w.Duration, w.Attempts)
		},
		Lost: func(ctx context.Context, h core.HoldInfo) {
			log.Printf("lock %s (fence %d) lost after %v: %v", h.Lock.Name(), h.Lock.Fence(), h.Duration, h.Err)
		},
	}
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}), core.WithHook(hook))
	defer locks.Close(context.Background())
}

func ExampleClient_Inspect() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}), core.WithLabel("invoicer"))
	defer locks.Close(ctx)

	// Who holds invoice:42, since when, and how many fair waiters are queued? (Read only.)
	info, err := locks.Inspect(ctx, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range info.Holders {
		log.Printf("held by %s (pid %d, %s, token digest %s) for %v, %d hold(s); expires in %v; fence %d; %d queued",
			h.Host, h.PID, h.Label, h.Digest, h.HeldFor, h.Holds, info.TTL, info.Fence, info.Queued)
	}
}

func ExampleClient_ForceRelease() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	defer locks.Close(ctx)

	// An operator ends a stuck hold: the next waiter is woken now, the holder's context is
	// cancelled (a *LostError) at its next renewal.
	if deleted, err := locks.ForceRelease(ctx, "invoice:42"); err != nil {
		log.Fatal(err)
	} else if !deleted {
		log.Print("invoice:42 was not held")
	}
}

func ExampleWithMaxHold() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	defer locks.Close(ctx)

	// However long renewals keep working, the hold ends after 10 minutes.
	err := locks.Do(ctx, "report:daily", 30*time.Second, func(ctx context.Context) error {
		return buildReport(ctx)
	}, core.WithMaxHold(10*time.Minute))
	if errors.Is(err, core.ErrMaxHold) {
		log.Print("the report took longer than 10 minutes and was stopped")
	}
}

func buildReport(context.Context) error { return nil }

func ExampleClient_DoAll() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	// A transfer locks both accounts, all or nothing; two transfers between the same accounts in
	// opposite directions never wait on each other for ever.
	err := locks.DoAll(ctx, []string{"account:7", "account:9"}, 10*time.Second, func(ctx context.Context) error {
		return nil // move the money, under ctx
	})
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_AcquireAll() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	set, err := locks.AcquireAll(ctx, []string{"sku:1", "sku:2", "sku:3"}, 10*time.Second, core.WithWait(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer set.Release(ctx)
	for _, l := range set.Locks() {
		fmt.Println(l.Name(), l.Fence() > 0) // each name keeps its own fence
	}
	<-set.Context().Done() // cancelled when any of them is lost, or the set released
}

func ExampleClient_TryAcquireAll() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	// One attempt: every name, or none (nothing is left behind when one of them is taken).
	set, err := locks.TryAcquireAll(ctx, []string{"shard:3", "shard:4"}, 30*time.Second)
	if errors.Is(err, core.ErrNotAcquired) {
		log.Print("a shard is busy; nothing was taken")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer set.Release(ctx)
}

func ExampleSetFromContext() {
	ctx := context.Background()
	locks, _ := core.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	_ = locks.DoAll(ctx, []string{"account:7", "account:9"}, 10*time.Second, func(ctx context.Context) error {
		set, _ := core.SetFromContext(ctx)
		for _, l := range set.Locks() {
			_ = l.Fence() // hand each account's fence to the store that keeps that account
		}
		return nil
	})
}
