package core

import (
	"context"
	"time"
)

// giveBack releases, in the background, the hold an acquire attempt may have taken although its
// reply was lost (a timeout, a cancelled context, a broken connection): otherwise the lock would
// stay taken, by nobody, for its TTL. The attempt may still be on its way to Redis, so a give-back
// that finds nothing tries again a little later. Best effort, bounded by the lock's TTL (at most
// 5s); Close waits for it.
func (c *Client) giveBack(l *Lock) {
	k, tok, hold, fair, ttl := l.k, l.tok, l.hold, l.fair, l.ttl
	attempt := func(ctx context.Context) bool {
		n, err := c.st.release(ctx, &k, tok, hold, fair, ttl)
		return err == nil && n >= 0
	}
	c.bgMu.Lock()
	closing := c.bgDone
	if !closing {
		c.bg.Add(1)
	}
	c.bgMu.Unlock()
	if closing { // one try, here
		ctx, cancel := context.WithTimeout(context.Background(), min(ttl, time.Second))
		attempt(ctx)
		cancel()
		return
	}
	go func() {
		defer c.bg.Done()
		ctx, cancel := context.WithTimeout(c.bgCtx, min(ttl, 5*time.Second))
		defer cancel()
		for _, d := range [...]time.Duration{0, 50 * time.Millisecond, 500 * time.Millisecond} {
			if (d > 0 && !sleepCtx(ctx, d)) || attempt(ctx) {
				return
			}
		}
	}()
}

// waitBackground waits for the give-backs under way, cutting them short when ctx ends.
func (c *Client) waitBackground(ctx context.Context) {
	c.bgMu.Lock()
	c.bgDone = true
	c.bgMu.Unlock()
	done := make(chan struct{})
	go func() {
		c.bg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		c.bgStop()
		<-done
	}
	c.bgStop()
}
