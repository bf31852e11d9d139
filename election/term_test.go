package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// A Client's WithDefaultMaxHold ends its plain locks, not its election terms: a term lasts past
// it (three times it, while a lock taken alongside is ended by it) until it is resigned.
func TestElection_defaultMaxHoldDoesNotEndTerms(t *testing.T) {
	const limit = 300 * time.Millisecond
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	locks := locktest.NewClient(t, rdb, core.WithDefaultMaxHold(limit))
	el, err := election.New(locks, rdb, "long", election.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	term, err := el.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	lock, err := locks.Acquire(ctx, "plain", time.Second) // the Client's default applies to it
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lock.Context().Done():
		if cause := context.Cause(lock.Context()); !errors.Is(cause, core.ErrMaxHold) {
			t.Fatalf("the plain lock ended with %v, want the Client's maximum hold", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the plain lock was not ended by the Client's WithDefaultMaxHold")
	}
	select {
	case <-term.Context().Done():
		t.Fatalf("the term ended after %v: %v", time.Since(began), context.Cause(term.Context()))
	case <-time.After(time.Until(began.Add(3 * limit))):
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("resign after %v: %v", time.Since(began), err)
	}
	if cause := context.Cause(term.Context()); !errors.Is(cause, core.ErrReleased) {
		t.Fatalf("term ended with %v, want ErrReleased", cause)
	}
}

// WithMaxTerm ends a term after its limit, with a *core.MaxHoldError cause, even while its
// renewals succeed; the next campaigner then leads, and a late Resign reports the limit.
func TestElection_withMaxTermEndsTerms(t *testing.T) {
	const limit = 300 * time.Millisecond
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := election.New(locktest.NewClient(t, rdb), rdb, "bounded", election.WithMaxTerm(-time.Second)); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("negative WithMaxTerm: %v, want ErrInvalid", err)
	}
	el, err := election.New(locktest.NewClient(t, rdb), rdb, "bounded", election.WithTTL(5*time.Second), election.WithMaxTerm(limit))
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now() // before the lock is taken: the limit counts from its acquisition
	term, err := el.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unbounded, err := election.New(locktest.NewClient(t, rdb), rdb, "bounded", election.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan *election.Term, 1)
	go func() {
		t2, err := unbounded.Campaign(ctx, "b")
		if err != nil {
			t.Error(err)
		}
		next <- t2
	}()
	select {
	case <-term.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the term outlived WithMaxTerm")
	}
	if d := time.Since(began); d < limit {
		t.Fatalf("the term ended after %v, before its limit", d)
	}
	var mh *core.MaxHoldError
	if cause := context.Cause(term.Context()); !errors.Is(cause, core.ErrMaxHold) || errors.Is(cause, core.ErrLost) ||
		!errors.As(cause, &mh) || mh.Limit != limit {
		t.Fatalf("term ended with %v, want a *core.MaxHoldError of %v", cause, limit)
	}
	t2 := <-next
	if t2 == nil {
		t.FailNow()
	}
	if t2.Fence() <= term.Fence() || t2.Value() != "b" {
		t.Fatalf("next term: fence %d (after %d), value %q", t2.Fence(), term.Fence(), t2.Value())
	}
	if d := time.Since(began); d > 4*time.Second {
		t.Fatalf("the next campaigner led %v after the first term began (TTL 5s): woken by the expiry, not the release", d)
	}
	if err := term.Resign(ctx); !errors.Is(err, core.ErrMaxHold) {
		t.Fatalf("Resign after the limit: %v, want ErrMaxHold", err)
	}
	if err := t2.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}
