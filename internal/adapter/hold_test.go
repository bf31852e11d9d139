package adapter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/adapter"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

func TestMain(m *testing.M) { locktest.VerifyTestMain(m) }

// Acquire takes one key's lock, one of its permits with a limit, or a set's locks all or
// nothing, in the namespace; it tries once by default and waits with a wait; Hold releases what
// it took.
func TestOptions_Acquire(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locks := locktest.NewClient(t, rdb)
	ctx := context.Background()
	o := adapter.New("pkg", 5*time.Second, "ns")
	if err := o.Validate("Ctor"); err != nil {
		t.Fatal(err)
	}

	h, err := o.Acquire(ctx, locks, []string{"a"})
	if err != nil || !locktest.Held(t, rdb, locktest.Key("@ns/a")) {
		t.Fatalf("one key: %v", err)
	}
	if l, _ := core.FromContext(h.Context()); l.Name() != "@ns/a" {
		t.Fatalf("the hold's context carries %v", l)
	}
	if _, err := o.Acquire(ctx, locks, []string{"b", "a"}); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a set with a held key: %v, want ErrNotAcquired", err)
	}
	if locktest.Held(t, rdb, locktest.Key("@ns/b")) {
		t.Fatal("a refused set left a key behind")
	}
	if err := h.Release(ctx, time.Second); err != nil || locktest.Held(t, rdb, locktest.Key("@ns/a")) {
		t.Fatalf("release: %v", err)
	}

	set, err := o.Acquire(ctx, locks, []string{"b", "a"})
	if err != nil || !locktest.Held(t, rdb, locktest.Key("@ns/a")) || !locktest.Held(t, rdb, locktest.Key("@ns/b")) {
		t.Fatalf("a set: %v", err)
	}
	waiting := o
	waiting.SetWait(10 * time.Second)
	got := make(chan error, 1)
	go func() {
		h, err := waiting.Acquire(ctx, locks, []string{"a"})
		if err == nil {
			err = h.Release(ctx, time.Second)
		}
		got <- err
	}()
	locktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return len(srv.Do(t, "PUBSUB", "CHANNELS", "*{@ns/a}*").([]any)) > 0
	})
	if err := set.Release(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}

	limited := adapter.New("pkg", 5*time.Second, "ns")
	limited.SetLimit(2)
	if err := limited.Validate("Ctor"); err != nil {
		t.Fatal(err)
	}
	extra := make([]core.AcquireOption, 0, 4) // spare capacity: Acquire must not write into it
	var held []adapter.Hold
	for range 2 {
		h, err := limited.Acquire(ctx, locks, []string{"p"}, extra...)
		if err != nil {
			t.Fatal(err)
		}
		if l, _ := core.FromContext(h.Context()); l.Limit() != 2 {
			t.Fatalf("not a permit of 2: %v", l.Limit())
		}
		held = append(held, h)
	}
	if _, err := limited.Acquire(ctx, locks, []string{"p"}, extra...); !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("a third permit of 2: %v", err)
	}
	if len(extra) != 0 || extra[:1][0] != nil {
		t.Fatal("Acquire wrote into the caller's options")
	}
	for _, h := range held {
		if err := h.Release(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
}
