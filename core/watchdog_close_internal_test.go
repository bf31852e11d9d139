package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
)

// Close ends every hold, those too that a renewal round has set aside: collect takes the holds due
// soon out of the heap and, every collectYield of them, lets others have w.mu. A Close in that gap
// used to end only the holds left in the heap; collect then put the others back in a stopped
// watchdog, their locks unreleased, their contexts open past the locks' expiry.
func TestWatchdog_closeEndsTheHoldsARoundSetAside(t *testing.T) {
	srv := redistest.Start(t)
	c, err := New(srv.Client(t), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { _ = c.Close(ctx) })
	const n = 8 * collectYield // (eight gaps in collect's hold of w.mu)
	held := make([]context.Context, n)
	for i := range held {
		l, err := c.TryAcquire(ctx, fmt.Sprint("aside-", i), time.Minute) // (first renewal: 20 s away)
		if err != nil {
			t.Fatal(err)
		}
		held[i] = l.Context()
	}

	// A guard of two hours (timers seen an hour late): every hold is due within it, so collect
	// sets each aside (not due for renewal yet, nor expired).
	w := c.wd
	w.mu.Lock()
	w.late.observe(time.Now(), time.Hour)
	w.mu.Unlock()

	// Run rounds until the test has w.mu while one is in a gap, with holds set aside.
	var done chan struct{}
	for caught := false; !caught; {
		done = make(chan struct{})
		go func() {
			defer close(done)
			w.collect(new(round))
		}()
		for over := false; !caught && !over; {
			if w.mu.TryLock() {
				caught = w.h.Len() < n
				w.mu.Unlock()
			}
			select {
			case <-done:
				over = !caught
			default:
			}
		}
		if !caught {
			t.Log("the round ended before the test saw a gap; again")
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	<-done

	open := 0
	for _, h := range held {
		select {
		case <-h.Done():
			if !errors.Is(context.Cause(h), ErrClosed) {
				t.Fatalf("a hold's context ended with %v, want ErrClosed", context.Cause(h))
			}
		default:
			open++
		}
	}
	w.mu.Lock()
	left := w.h.Len()
	w.mu.Unlock()
	if open > 0 || left > 0 {
		t.Fatalf("after Close, %d of %d holds' contexts are open and %d holds are in the stopped "+
			"watchdog's heap (set aside by a renewal round when Close came)", open, n, left)
	}
}
