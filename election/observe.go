package election

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Observe reports the current leader at once (the zero Leader if nobody leads), then every change
// until ctx ends, when the channel is closed: each new leader with its fence, and each vacancy (a
// resignation, or a leader's lock that expired). Leaders come in term order: a report never has a
// smaller fence than the one before. A term that began and ended while the observer's
// subscription was reconnecting can be missed. The observer waits for its receiver: read the
// channel until ctx ends.
//
// Each Observe holds one subscription connection and reads the lock when the leader's TTL runs
// out, and at least every second.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	chans := []string{e.key + ":leader", e.key + ":released"}
	var ps *redis.PubSub
	if c, ok := e.rdb.(*redis.ClusterClient); ok {
		ps = c.SSubscribe(ctx, chans...)
	} else {
		ps = e.rdb.Subscribe(ctx, chans...)
	}
	defer ps.Close()
	// Subscribed before the first read, so that no change falls between the two.
	for confirmed := 0; confirmed < len(chans); {
		m, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if _, ok := m.(*redis.Subscription); ok {
			confirmed++
		} else if err != nil {
			break // poll only; go-redis resubscribes when the connection comes back
		}
	}
	var (
		last Leader
		sent bool
	)
	emit := func(l Leader) bool {
		if sent && !(l.Fence > last.Fence || (l.Fence == 0 && last.Fence != 0)) {
			return true // no change, or a stale report
		}
		select {
		case out <- l:
			last, sent = l, true
			return true
		case <-ctx.Done():
			return false
		}
	}
	msgs := ps.Channel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if strings.HasSuffix(m.Channel, ":leader") {
				if l, ok := parseAnnounce(m.Payload); ok && !emit(l) {
					return
				}
			}
		case <-timer.C:
		}
		l, pttl, err := e.read(ctx)
		next := pollEvery
		if err == nil {
			if !emit(l) {
				return
			}
			if l.Fence != 0 && pttl > 0 && pttl < next {
				next = pttl + time.Millisecond // be there when an abandoned lock expires
			}
		}
		timer.Reset(next)
	}
}
