package election

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Observe reports the current leader at once (the zero Leader if nobody leads; as soon as Redis
// answers), then every change until ctx ends, when the channel is closed:
//
//   - Leaders come in fence order: each reported leader has a larger fence than every leader
//     reported before it (a vacancy does not reset this), so an older term is never reported
//     after a newer one, and no term twice.
//   - While the observer's subscription is healthy, every term whose leader proclaimed itself (a
//     Campaign that returned a Term) is reported, however short it was.
//   - A vacancy (the zero Leader) is reported only once the term reported before it has ended
//     (resigned, expired or taken away), and never twice in a row. Not every vacancy is reported:
//     when the next leader proclaims itself before the observer has read the lock, the two terms
//     are reported one after the other. A leader that has taken the lock but not yet recorded its
//     value counts as no leader.
//
// What it may skip: a term whose announcement was lost while the subscription was down or
// reconnecting, or held up while the subscription stalled (no message and no answer to the
// observer's PING for a second), when that term had ended by the observer's next read of the lock
// or a later term was reported first (a term still current at that read is reported from it); a
// leader that took the lock but failed before recording its value (its Campaign returned an
// error).
//
// A new leader is reported when its announcement arrives. The observer reads the lock after each
// message (the leader's release publishes one), when the leader's lock would expire, and at least
// every second. When a read shows a term above the last one reported, the observer first waits
// for the announcements published before the read (one round trip: a PING on the subscription,
// answered after them), then reports what the read shows beyond them: a vacancy, or a leader
// whose announcement was lost. The observer waits for its receiver: read the channel until ctx
// ends.
//
// Each Observe holds one subscription connection (the leader's announcements and the lock's
// release channel, and its PINGs) and reads the lock (GET and PTTL) through the Election's client.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go e.observe(ctx, out)
	return out
}

// settleWithin bounds how long a read waits for the announcements published before it while the
// subscription is silent: longer, and it is taken as stalled and the read settles without them.
const settleWithin = time.Second

// pingPayload is the payload of an observer's PING number seq.
func pingPayload(seq int) string { return "lockkit-observe " + strconv.Itoa(seq) }

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	chans := []string{e.key + ":leader", e.key + ":released"}
	var ps *redis.PubSub
	if c, ok := e.rdb.(*redis.ClusterClient); ok {
		ps = c.SSubscribe(ctx, chans...)
	} else {
		ps = e.rdb.Subscribe(ctx, chans...)
	}
	events := make(chan any, 64)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		receive(ctx, ps, events, quit)
	}()
	defer func() {
		close(quit)
		_ = ps.Close()
		wg.Wait()
	}()
	o := &observer{e: e, ps: ps, out: out, events: events}
	o.run(ctx, len(chans))
}

// receive passes the subscription's messages, subscription confirmations, PING answers and errors
// on to events until quit is closed. go-redis reconnects and subscribes again after an error.
func receive(ctx context.Context, ps *redis.PubSub, events chan<- any, quit <-chan struct{}) {
	failed := false
	for {
		m, err := ps.Receive(ctx)
		if err != nil {
			m = err
		}
		select {
		case events <- m:
		case <-quit:
			return
		}
		if err != nil && failed { // failing again: do not spin while Redis is unreachable
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-t.C:
			case <-quit:
				t.Stop()
				return
			}
		}
		failed = err != nil
	}
}

// observer is the state of one Observe.
type observer struct {
	e      *Election
	ps     *redis.PubSub
	out    chan<- Leader
	events <-chan any
	order  order

	seq     int        // the number of the PING a pending read waits for (its payload: pingPayload(seq))
	pending *lockState // a read waiting for the announcements published before it
	topThen int64      // order.top when the pending read was sent
}

func (o *observer) run(ctx context.Context, chans int) {
	// Subscribed before the first read, so that no change falls between the two.
	for confirmed := 0; confirmed < chans; {
		select {
		case <-ctx.Done():
			return
		case m := <-o.events:
			if _, ok := m.(*redis.Subscription); ok {
				confirmed++
			} else if _, ok := m.(error); ok {
				confirmed = chans // poll only until go-redis has subscribed again
			}
		}
	}
	poll := time.NewTimer(0)
	defer poll.Stop()
	settle := time.NewTimer(settleWithin)
	settle.Stop()
	defer settle.Stop()
	readNow := false
	for {
		var m any
		select { // what the subscription delivered first: it may settle a pending read
		case m = <-o.events:
		default:
			select {
			case <-ctx.Done():
				return
			case m = <-o.events:
			case <-poll.C:
				readNow = true
			case <-settle.C:
				if !o.settle(ctx) { // the subscription stalled: the read settles without the rest
					return
				}
			}
		}
		if m != nil {
			if o.pending != nil {
				settle.Reset(settleWithin) // the subscription is alive
			}
			again, ok := o.handle(ctx, m)
			if !ok {
				return
			}
			readNow = readNow || again
		}
		if !readNow || o.pending != nil {
			continue
		}
		readNow = false
		s, err := o.e.read(ctx)
		if err != nil {
			poll.Reset(pollEvery)
			continue
		}
		next := pollEvery
		if s.held && s.pttl > 0 && s.pttl < next {
			next = s.pttl + time.Millisecond // be there when an abandoned lock expires
		}
		poll.Reset(next)
		o.pending, o.topThen = &s, o.order.top
		if o.order.caughtUp(s) {
			if !o.settle(ctx) {
				return
			}
			continue
		}
		// Every announcement published before the read reaches this connection before the answer
		// to a PING sent after it.
		o.seq++
		if err := o.ps.Ping(ctx, pingPayload(o.seq)); err != nil {
			if !o.settle(ctx) { // the subscription failed: nothing more comes before the read
				return
			}
			continue
		}
		settle.Reset(settleWithin)
	}
}

// handle handles an event of the subscription and reports whether to read the lock; ok is false
// when ctx ended.
func (o *observer) handle(ctx context.Context, m any) (read, ok bool) {
	switch m := m.(type) {
	case *redis.Message:
		if strings.HasSuffix(m.Channel, ":leader") {
			if l, valid := parseAnnounce(m.Payload); valid && o.order.announced(l) && !o.emit(ctx, l) {
				return false, false
			}
		}
		return true, true // a new leader (read its TTL) or a release
	case *redis.Pong:
		if o.pending != nil && m.Payload == pingPayload(o.seq) {
			return false, o.settle(ctx)
		}
	case *redis.Subscription: // subscribed again after a failure: announcements may have been lost
		return true, o.settle(ctx)
	case error:
		if !errors.Is(m, redis.ErrClosed) {
			return false, o.settle(ctx) // the PING's answer, if any, is lost with the connection
		}
	}
	return false, true
}

// settle reports what the pending read shows, if anything, and clears it; false when ctx ended.
func (o *observer) settle(ctx context.Context) bool {
	if o.pending == nil {
		return true
	}
	s := *o.pending
	o.pending = nil
	if l, ok := o.order.settle(s, o.topThen); ok {
		return o.emit(ctx, l)
	}
	return true
}

// emit sends l to the receiver; false when ctx ended first.
func (o *observer) emit(ctx context.Context, l Leader) bool {
	select {
	case o.out <- l:
		return true
	case <-ctx.Done():
		return false
	}
}
