package core

import (
	"context"
	"fmt"
	"time"
)

// giveBack releases, in the background, the hold an acquire attempt may have taken although its
// reply was lost (a timeout, a cancelled context, a broken connection): otherwise the lock would
// stay taken, by nobody, for its TTL. The attempt may still be on its way to Redis, so a give-back
// that finds nothing tries again a little later. Best effort, bounded by the lock's TTL (at most
// 5s); Close waits for it.
func (c *Client) giveBack(l *Lock) {
	k, tok, hold, fair, ttl := l.k.givenBack(l.token), l.tok, l.hold, l.fair, l.ttl
	attempt := func(ctx context.Context) bool {
		n, err := c.sendRelease(ctx, &k, tok, hold, fair, nil, ttl)
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

// outlived gives back a hold whose acquisition was answered after its validity deadline (sent +
// TTL − drift) and returns an error saying so; nil when the reply came in time. Redis may have run
// the script at any moment since it was sent, so how long such a lock is still ours is unknown: a
// slow network or a paused Redis must not hand out a lock whose safety margin is spent.
func (c *Client) outlived(ctx context.Context, l *Lock, sent time.Time) error {
	lease := l.firstLease()
	took, validity := time.Since(sent), lease-c.opt.drift(lease)
	if took < validity {
		return nil
	}
	// The lock expires at most TTL from now: there is no point in trying for longer.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl)
	_, err := c.sendRelease(rctx, &l.k, l.tok, l.hold, l.fair, nil, l.ttl)
	cancel()
	back := "the lock was given back"
	if err != nil {
		back = fmt.Sprintf("giving the lock back failed (%v); it expires within its TTL", err)
	}
	return unavailable("acquire", fmt.Errorf("the reply took %v, longer than the lock's validity (%v); %s",
		took.Round(time.Millisecond), validity, back))
}
