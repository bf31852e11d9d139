package wait

import (
	"context"
	"math/rand/v2"
	"time"
)

// Call is one waiting call's part in the wake-up machinery: its place in the Client's local queue
// once it waits, its fallback delay and its wait limit. Set Q, Handoff, Backoff, MaxBack and
// Deadline before the first Join.
type Call struct {
	Q        *Queues
	W        *Waiter          // the call's place in the local queue, once it waits
	Digest   string           // fair mode and permits: the token's digest, once the server gave it
	Handoff  bool             // queued in Redis, where a release may grant it the hold directly
	Woken    bool             // the next attempt follows a release message
	Backoff  time.Duration    // the fallback delay: it doubles up to MaxBack
	MaxBack  time.Duration    //
	Deadline <-chan time.Time // the call's wait limit
	// Split and RoundTrip describe the call's last attempt: over Redlock, granted a minority of
	// the nodes, which it gave back (store.AcquireResult.Split), and how long it took.
	Split     bool
	RoundTrip time.Duration
	soon      bool // the last park was a retry after a split vote
}

// Join queues the call behind the Client's other waiters on ch; it reports false when the Queues
// closed.
func (c *Call) Join(ch string) bool {
	c.W = c.Q.Join(ch, c.Digest, c.Handoff)
	return c.W != nil
}

// Ready waits until the call's channel subscription is confirmed, or at most the backoff.
func (c *Call) Ready(ctx context.Context) Parked {
	if poll(c.W.q.ready) {
		return Woken // confirmed already
	}
	return c.wait(ctx, c.W.q.ready, c.Backoff)
}

// Park waits for a release message, or for a fallback delay of about d (jittered down to half):
// stretched to ten times MaxBack when rare and the call is not the first local waiter, which
// alone polls as a fallback (the others are woken in turn). The backoff doubles when the delay
// passes; it is not reset by a wake-up (a waiter that loses the race keeps its fallback long, and
// the next release wakes it anyway).
//
// After a Redlock split vote (Split) it waits two round trips instead, once: callers that came
// together, each granted a minority of the nodes, give it back within a round trip or so, which no
// release message says (a Redlock waiter wakes on a quorum's); the growing fallback delay made a
// hot key serve one critical section a second (issue #38). A second split in a row waits as usual.
func (c *Call) Park(ctx context.Context, d time.Duration, rare bool) Parked {
	soon := c.Split && !c.soon
	c.soon = soon
	head := c.Q.Requeue(c.W)
	switch {
	case soon:
		d = min(d, max(2*c.RoundTrip, time.Millisecond))
	case !head && rare:
		d = max(d, 10*c.MaxBack)
	}
	why := c.wait(ctx, c.W.wake, d/2+rand.N(d/2+1))
	switch {
	case why == Woken:
		c.Woken = true
	case why == Elapsed && !soon:
		c.Backoff = min(c.Backoff*2, c.MaxBack)
	}
	return why
}

// Leave leaves the local queue, if the call joined it; a grant to a Handoff call that it did not
// take is dropped here (the caller's Redis-side dequeue hands it on).
func (c *Call) Leave(acquired bool) {
	if c.W == nil {
		return
	}
	if c.Handoff {
		c.Q.TakeGrant(c.W)
	}
	c.Q.Leave(c.W, acquired)
}

// wait waits at most d for ch, or until ctx ends, the call's wait limit passes or the Queues close.
func (c *Call) wait(ctx context.Context, ch <-chan struct{}, d time.Duration) Parked {
	select {
	case <-ch:
		return Woken
	case <-time.After(d):
		return Elapsed
	case <-ctx.Done():
		return Cancelled
	case <-c.Deadline:
		return Deadline
	case <-c.Q.closed:
		return Closed
	}
}
