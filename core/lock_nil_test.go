package core_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
)

// Issue #16, defect 13: a failed acquisition returns a nil *Lock, and `defer l.Release(ctx)` before
// the error check is a common slip: every method of a nil *Lock answers instead of panicking.
func TestLock_nil_everyMethodAnswers(t *testing.T) {
	var l *core.Lock
	ctx := context.Background()
	notHeld := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, core.ErrNotHeld) {
			t.Errorf("%s on a nil lock = %v, want ErrNotHeld", what, err)
		}
	}
	tested := map[string]bool{}
	call := func(name string, f func()) {
		t.Helper()
		tested[name] = true
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s on a nil lock panicked: %v", name, r)
			}
		}()
		f()
	}
	call("Release", func() { notHeld("Release", l.Release(ctx)) })
	call("ReleaseSet", func() { notHeld("ReleaseSet", l.ReleaseSet(ctx, "lockkit:done:{k}", []byte("v"), time.Minute)) })
	call("Extend", func() { notHeld("Extend", l.Extend(ctx, time.Second)) })
	call("TTL", func() {
		d, err := l.TTL(ctx)
		notHeld("TTL", err)
		if d != 0 {
			t.Errorf("TTL = %v", d)
		}
	})
	call("Context", func() {
		c := l.Context()
		if c.Err() == nil || !errors.Is(context.Cause(c), core.ErrNotHeld) {
			t.Errorf("Context: err %v, cause %v; want cancelled with ErrNotHeld", c.Err(), context.Cause(c))
		}
		if _, ok := core.FromContext(c); ok {
			t.Error("the context of a nil lock carries a lock")
		}
	})
	call("Name", func() { check(t, "Name", l.Name(), "") })
	call("Key", func() { check(t, "Key", l.Key(), "") })
	call("Token", func() { check(t, "Token", l.Token(), "") })
	call("Fence", func() { check(t, "Fence", l.Fence(), int64(0)) })
	call("Holds", func() { check(t, "Holds", l.Holds(), int64(0)) })
	call("Limit", func() { check(t, "Limit", l.Limit(), 0) })
	call("Mode", func() { check(t, "Mode", l.Mode(), "") })
	typ := reflect.TypeFor[*core.Lock]()
	for i := range typ.NumMethod() {
		if m := typ.Method(i).Name; !tested[m] {
			t.Errorf("(*Lock).%s is not tested on a nil lock", m)
		}
	}

	// The slip itself: a failed acquire, then the deferred Release.
	_, _, c := setup(t)
	held, err := c.TryAcquire(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	l, err = c.TryAcquire(ctx, "k", time.Second)
	if !errors.Is(err, core.ErrNotAcquired) {
		t.Fatalf("second TryAcquire: %v", err)
	}
	notHeld("Release after a failed acquire", l.Release(ctx))
}

func check[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s on a nil lock = %v, want %v", what, got, want)
	}
}
