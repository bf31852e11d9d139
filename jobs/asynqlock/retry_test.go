package asynqlock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/jobs/asynqlock"
)

func TestIsFailure(t *testing.T) {
	busy := fmt.Errorf("wrapped: %w", &asynqlock.KeyBusyError{Key: "k", RetryAfter: time.Second})
	other := errors.New("boom")
	def := asynqlock.IsFailure(nil)
	if def(busy) || !def(other) || def(nil) {
		t.Errorf("IsFailure(nil): busy %v, other %v, nil %v; want false, true, false", def(busy), def(other), def(nil))
	}
	if def(asynqlock.ErrKeyBusy) {
		t.Error("the sentinel itself counted as a failure")
	}
	// The user's own predicate decides for every other error, and is not asked about busy keys.
	asked := 0
	own := asynqlock.IsFailure(func(err error) bool { asked++; return !errors.Is(err, other) })
	if own(busy) || own(other) || !own(errors.New("x")) || asked != 2 {
		t.Errorf("IsFailure(own): busy %v, other %v, asked %d times", own(busy), own(other), asked)
	}
}

func TestRetryDelayFunc(t *testing.T) {
	next := func(n int, _ error, _ *asynq.Task) time.Duration { return time.Duration(n) * time.Hour }
	f := asynqlock.RetryDelayFunc(next)
	task := asynq.NewTask("t", nil)
	for range 100 {
		d := f(3, fmt.Errorf("w: %w", &asynqlock.KeyBusyError{RetryAfter: time.Second}), task)
		if d < time.Second || d > 1200*time.Millisecond {
			t.Fatalf("busy with RetryAfter 1s: delay %v, want 1s..1.2s", d)
		}
		if d := f(3, &asynqlock.KeyBusyError{}, task); d < 50*time.Millisecond || d > 60*time.Millisecond {
			t.Fatalf("busy with RetryAfter 0: delay %v, want the 50ms floor plus jitter", d)
		}
	}
	if d := f(3, errors.New("boom"), task); d != 3*time.Hour {
		t.Errorf("other error: delay %v, want the wrapped func's 3h", d)
	}
	if d := asynqlock.RetryDelayFunc(nil)(0, errors.New("boom"), task); d < 15*time.Second || d > 45*time.Second {
		t.Errorf("nil next: delay %v, want asynq's default (15s..45s for the first retry)", d)
	}
}

func TestKeyBusyError_message(t *testing.T) {
	err := &asynqlock.KeyBusyError{Key: "secret-customer", RetryAfter: 1500 * time.Millisecond}
	if got, want := err.Error(), "lockkit: asynqlock: task key busy, retry after 1.5s"; got != want {
		t.Errorf("Error() = %q, want %q (without the key)", got, want)
	}
}
