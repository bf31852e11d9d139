package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
)

// The lock's context is made when first asked for: one asked for after the hold ended must say
// what it would have said had it been made at the acquisition.
func TestContext_madeLate_keepsTheCause(t *testing.T) {
	_, _, c := setup(t)
	type key struct{}
	base := context.WithValue(context.Background(), key{}, "v")

	t.Run("released, then the parent cancelled", func(t *testing.T) {
		parent, cancel := context.WithCancelCause(base)
		l, err := c.Acquire(parent, "ctx-a", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		cancel(errors.New("later"))
		ctx := l.Context()
		if cause := context.Cause(ctx); !errors.Is(cause, core.ErrReleased) || ctx.Err() != context.Canceled {
			t.Fatalf("cause %v, err %v: want ErrReleased, Canceled", cause, ctx.Err())
		}
		if ctx.Value(key{}) != "v" {
			t.Fatal("the parent's values are lost")
		}
		if got, ok := core.FromContext(ctx); !ok || got != l {
			t.Fatal("FromContext does not find the lock")
		}
	})

	t.Run("the parent cancelled, then released", func(t *testing.T) {
		parent, cancel := context.WithCancelCause(base)
		l, err := c.Acquire(parent, "ctx-b", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		first := errors.New("first")
		cancel(first)
		_ = l.Release(context.Background())
		if cause := context.Cause(l.Context()); !errors.Is(cause, first) {
			t.Fatalf("cause %v, want the parent's", cause)
		}
	})

	t.Run("made while held", func(t *testing.T) {
		l, err := c.Acquire(base, "ctx-c", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ctx := l.Context()
		if ctx != l.Context() || ctx.Err() != nil {
			t.Fatal("Context is not one live context")
		}
		inner, err := c.TryAcquire(ctx, "ctx-c", time.Second)
		if err != nil || inner.Holds() == 1 {
			t.Fatalf("re-entry through the context: %v", err)
		}
		_ = inner.Release(context.Background())
		if ctx.Err() != nil {
			t.Fatal("the outer hold's context ended with the inner hold")
		}
		_ = l.Release(context.Background())
		<-ctx.Done()
		if cause := context.Cause(ctx); !errors.Is(cause, core.ErrReleased) {
			t.Fatalf("cause %v, want ErrReleased", cause)
		}
	})
}
