package core_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/locktest"
)

// Holds that end together (their WithMaxHold limit passed in one watchdog round, or their Client
// closed) all have their contexts ended before the first of their releases is sent: a release
// that is slow to answer must not postpone the end of another hold. The Released hook reports a
// hold once its release answered; by then every hold ending with it must be done.
func TestEndTogether_everyContextEndsBeforeTheReleases(t *testing.T) {
	reenter := func(t *testing.T, c *core.Client, keep func(*core.Lock), name string, opts ...core.AcquireOption) {
		ctx := context.Background()
		outer, err := c.Acquire(ctx, name, 10*time.Second, opts...)
		if err != nil {
			t.Fatal(err)
		}
		keep(outer)
		inner, err := c.Acquire(outer.Context(), name, 10*time.Second) // a re-entry: the same entry
		if err != nil || inner.Holds() != 2 {
			t.Fatalf("re-entry: %v", err)
		}
		keep(inner)
	}
	cases := []struct {
		name  string
		hold  func(t *testing.T, c *core.Client, keep func(*core.Lock))
		close bool
	}{
		{name: "max hold of a re-entered lock", hold: func(t *testing.T, c *core.Client, keep func(*core.Lock)) {
			// (the re-entry inherits the limit: both holds end in the same round)
			reenter(t, c, keep, "mh", core.WithMaxHold(time.Second))
		}},
		{name: "close", close: true, hold: func(t *testing.T, c *core.Client, keep func(*core.Lock)) {
			reenter(t, c, keep, "a")
			l, err := c.Acquire(context.Background(), "b", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			keep(l)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb, _ := setup(t)
			var mu sync.Mutex
			var holds []*core.Lock
			var early []string // a release reported while another hold ending with it was not done
			reported := 0
			c := locktest.NewClient(t, rdb, core.WithHook(core.Hook{Released: func(_ context.Context, h core.HoldInfo) {
				mu.Lock()
				defer mu.Unlock()
				reported++
				for _, l := range holds {
					if l.Context().Err() == nil {
						early = append(early, fmt.Sprintf("%s (holds %d) before %s", h.Lock.Name(), h.Lock.Holds(), l.Name()))
					}
				}
			}}))
			tc.hold(t, c, func(l *core.Lock) {
				mu.Lock()
				holds = append(holds, l)
				mu.Unlock()
			})
			if tc.close {
				if err := c.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			all := append([]*core.Lock(nil), holds...)
			mu.Unlock()
			for _, l := range all {
				select {
				case <-l.Context().Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: the hold did not end", l.Name())
				}
			}
			locktest.Eventually(t, 5*time.Second, "every release reported", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return reported == len(all)
			})
			mu.Lock()
			defer mu.Unlock()
			if len(early) > 0 {
				t.Fatalf("released while a hold ending with it still ran: %v", early)
			}
		})
	}
}
