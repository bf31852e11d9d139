package chaos_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/core"
)

// manyWorkload holds several locks taken at once, so that the watchdog renews them in one round:
// on one server, in one renew_many.lua call (issue #38), whose commands the ACL must grant too. (On
// a cluster their names are in different slots: each goes with renew.lua.)
func manyWorkload(ctx context.Context, c *core.Client, p *aclProbe) error {
	var locks []*core.Lock
	defer func() {
		for _, l := range locks {
			_ = l.Release(ctx)
		}
	}()
	for i := range 3 {
		l, err := c.Acquire(ctx, "many"+strconv.Itoa(i), 300*time.Millisecond)
		if err != nil {
			return fmt.Errorf("acquire many: %w", err)
		}
		locks = append(locks, l)
	}
	for _, l := range locks {
		if err := p.await(l.Name(), 0, 1); err != nil {
			return err
		}
	}
	for _, l := range locks {
		if err := l.Release(ctx); err != nil {
			return fmt.Errorf("release many: %w", err)
		}
	}
	locks = nil
	return nil
}
