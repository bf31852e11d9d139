package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A Redlock Acquire that retries takes a new hold id per attempt, so that a failed attempt's
// give-back that reaches a node late (after a later attempt of the same call was granted there)
// drops only its own hold. With one hold id per call the late give-back freed the later grant on
// that node: the safety checker found it (seed 22: an overlap of 692 ms, a Do's lock taken by
// another owner on a quorum that counted that node).
func TestRedlock_retryAttempt_ownHold(t *testing.T) {
	srvs := redistest.StartN(t, 3)
	rdbs := make([]redis.UniversalClient, len(srvs))
	for i, s := range srvs {
		rdbs[i] = s.Client(t)
	}
	c, err := NewRedlock(rdbs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { _ = c.Close(ctx) })
	// Another owner holds the lock on two nodes: the first attempt is granted on the first node
	// only, fails and is given back; once it has, the other owner releases and the call retries.
	var others []*Lock
	for _, r := range rdbs[1:] {
		other, err := New(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = other.Close(ctx) })
		ol, err := other.TryAcquire(ctx, "retry", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, ol)
	}
	type result struct {
		l   *Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctx, "retry", 5*time.Second, WithWait(5*time.Second))
		done <- result{l, err}
	}()
	key := "lockkit:{retry}"
	deadline := time.Now().Add(3 * time.Second)
	for rdbs[0].Exists(ctx, key).Val() == 0 { // the first attempt's grant (or its give-back's free value)
		if time.Now().After(deadline) {
			t.Fatal("the first attempt never reached the first node")
		}
		time.Sleep(time.Millisecond)
	}
	for _, ol := range others {
		if err := ol.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res := <-done
	l, err := res.l, res.err
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	first := any("0") // the first attempt's hold id (a fresh token's)
	// The first attempt's give-back, arriving now at the first node: it must leave the later grant.
	n := store.NewNode(rdbs[0], c.id, &store.Config{}) // (as the Redlock's first node)
	k := l.k.GivenBack(l.Token())
	k.Fence = 0
	if _, err := n.Release(ctx, store.ReleaseReq{Keys: &k, Token: l.token, Hold: first}); err != nil {
		t.Fatal(err)
	}
	v, err := rdbs[0].Get(ctx, l.k.Main).Result()
	if err != nil {
		t.Fatal(err)
	}
	if tok, holds, _, ok := store.ReadValue(v); !ok || tok != l.Token() || strings.Join(holds, " ") != l.holdID {
		t.Fatalf("after the first attempt's late give-back the node holds %q, want %s's hold %v", v, l.Token(), l.holdID)
	}
}
