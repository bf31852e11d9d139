package wait

import (
	"context"
	"errors"
	"iter"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriber subscribes the channels that have waiters on the connections the Router chooses
// (feeds) and hands their messages to the queues. A writer goroutine sends (un)subscriptions in
// order, retrying what failed, and a reader per feed delivers messages, from the first channel on.
type subscriber struct {
	router Router
	q      *Queues
	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  sync.Once  // starts the writer
	mu     sync.Mutex // guards what follows, and the feeds' chans
	feeds  map[string]*feed
	wanted map[string]struct{} // channels that have waiters
	ops    []subOp
	shut   bool
}

type subOp struct {
	ch  string
	sub bool
}

// feed is one pub/sub connection and the channels subscribed on it; failed is its reader's.
type feed struct {
	key    string
	ps     *redis.PubSub
	chans  map[string]struct{}
	failed bool // it lost its connection at least once: re-confirmations mean missed messages

	sub   func(ctx context.Context, chs ...string) error // (S)SUBSCRIBE
	unsub func(ctx context.Context, chs ...string) error // (S)UNSUBSCRIBE
}

const (
	feedPing    = 5 * time.Second // a silent feed is pinged after this long
	feedRetry   = time.Second     // the writer retries and sweeps this often
	feedMaxWait = time.Second     // read backoff cap after errors
)

func newSubscriber(rt Router, q *Queues) *subscriber {
	s := &subscriber{router: rt, q: q, kick: make(chan struct{}, 1), feeds: make(map[string]*feed),
		wanted: make(map[string]struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// want subscribes ch, or unsubscribes it (on false).
func (s *subscriber) want(ch string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !on:
		delete(s.wanted, ch)
	case s.shut:
		return
	default:
		s.start.Do(func() { s.wg.Go(s.write) })
		s.wanted[ch] = struct{}{}
	}
	s.ops = append(s.ops, subOp{ch: ch, sub: on})
	signal(s.kick)
}

// write runs the subscription commands in order, retries what failed and sweeps idle queues.
func (s *subscriber) write() {
	tick := time.NewTicker(feedRetry)
	defer tick.Stop()
	var pending []subOp
	for {
		select {
		case <-s.kick:
		case now := <-tick.C:
			s.q.sweep(now)
		case <-s.ctx.Done():
			return
		}

		s.mu.Lock()
		ops := append(pending, s.ops...)
		s.ops = nil
		s.mu.Unlock()
		pending = s.apply(ops)
	}
}

// read delivers f's messages until the subscriber stops or f breaks.
func (s *subscriber) read(f *feed) {
	backoff := 10 * time.Millisecond
	pinged := false
	for {
		msg, err := f.ps.ReceiveTimeout(s.ctx, feedPing)
		if s.ctx.Err() != nil {
			return
		}

		var ne net.Error
		timeout := err != nil && errors.As(err, &ne) && ne.Timeout()
		switch {
		case timeout && !pinged:
			pinged = true
			_ = f.ps.Ping(s.ctx)
			continue
		case timeout, err != nil && s.router.Sharded():
			// No answer to the ping: the connection is dead (paused or partitioned server). Or
			// the slot may have moved: subscribe again where it lives now.
			s.broken(f)
			return
		case err != nil:
			f.failed = true
			if !Sleep(s.ctx, backoff) {
				return
			}
			backoff = min(backoff*2, feedMaxWait)
			continue
		}

		backoff, pinged = 10*time.Millisecond, false
		switch m := msg.(type) {
		case *redis.Message:
			s.q.deliver(m.Channel, m.Payload)
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				s.q.confirm(m.Channel, f.failed)
			case "sunsubscribe":
				s.moved(f, m.Channel)
			}
		}
	}
}

// Sleep waits for d; it reports false when ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// broken retires f: its channels are subscribed again through the router, and their waiters are
// woken, as releases may have been missed.
func (s *subscriber) broken(f *feed) {
	s.mu.Lock()
	delete(s.feeds, f.key) // (only f's reader retires f, once)
	missed := s.resubscribe(maps.Keys(f.chans))
	s.mu.Unlock()
	_ = f.ps.Close()
	s.q.missed(missed)
}

// moved handles a shard channel the server unsubscribed us from (its slot moved, e.g. after a
// failover) while we still want it: subscribe it again where it lives now, and wake its first
// waiter. Our own SUNSUBSCRIBEs are not affected: apply removes the channel from f first.
func (s *subscriber) moved(f *feed, ch string) {
	s.mu.Lock()
	var missed []string
	if _, ok := f.chans[ch]; ok {
		delete(f.chans, ch)
		missed = s.resubscribe(slices.Values([]string{ch}))
	}
	s.mu.Unlock()
	s.q.missed(missed)
}

// resubscribe reloads the topology and queues the subscription of chans, those still wanted; it
// returns them. The caller holds s.mu.
func (s *subscriber) resubscribe(chans iter.Seq[string]) (wanted []string) {
	for ch := range chans {
		if _, ok := s.wanted[ch]; ok {
			s.ops = append(s.ops, subOp{ch: ch, sub: true})
			wanted = append(wanted, ch)
		}
	}
	s.router.refresh(s.ctx)
	signal(s.kick)
	return wanted
}

// feedFor returns the feed for key, opening it (and its reader) if needed; the caller holds s.mu.
func (s *subscriber) feedFor(key string) *feed {
	if f := s.feeds[key]; f != nil {
		return f
	}
	f := &feed{key: key, ps: s.router.open(s.ctx, key), chans: make(map[string]struct{})}
	f.sub, f.unsub = f.ps.Subscribe, f.ps.Unsubscribe
	if s.router.Sharded() {
		f.sub, f.unsub = f.ps.SSubscribe, f.ps.SUnsubscribe
	}
	s.feeds[key] = f
	s.wg.Go(func() { s.read(f) })
	return f
}

// apply sends pending (un)subscriptions; it runs on the writer goroutine only, so commands for a
// channel go out in the order they were queued.
func (s *subscriber) apply(ops []subOp) (retry []subOp) {
	for _, op := range ops {
		if !op.sub {
			s.unsubscribe(op.ch)
			continue
		}

		rctx, cancel := context.WithTimeout(s.ctx, time.Second)
		keys, err := s.router.route(rctx, op.ch)
		cancel()
		if err != nil {
			retry = append(retry, op)
			continue
		}

		for _, key := range keys {
			s.mu.Lock()
			if _, ok := s.wanted[op.ch]; !ok { // unsubscribed meanwhile
				s.mu.Unlock()
				break
			}
			f := s.feedFor(key)
			_, had := f.chans[op.ch]
			f.chans[op.ch] = struct{}{}
			s.mu.Unlock()
			if had {
				continue
			}
			// Errors need no handling: go-redis records the channel and subscribes it again when it
			// reconnects; a broken feed is rebuilt; waiters fall back to their backoff meanwhile.
			_ = f.sub(s.ctx, op.ch)
		}
	}
	return retry
}

// unsubscribe drops ch from every feed that has it. (If ch was wanted again meanwhile, a subscribe
// op follows, and its confirmation readies the new queue.)
func (s *subscriber) unsubscribe(ch string) {
	s.mu.Lock()
	var fs []*feed
	for _, f := range s.feeds {
		if _, ok := f.chans[ch]; ok {
			delete(f.chans, ch)
			fs = append(fs, f)
		}
	}
	s.mu.Unlock()

	for _, f := range fs {
		_ = f.unsub(s.ctx, ch)
	}
}

// close stops the goroutines and closes the feeds (once: Queues.Close calls it).
func (s *subscriber) close() {
	s.mu.Lock()
	s.shut = true
	feeds := slices.Collect(maps.Values(s.feeds))
	s.mu.Unlock()

	s.cancel()
	for _, f := range feeds {
		_ = f.ps.Close()
	}
	s.wg.Wait()
}

// signal wakes whoever waits on c, unless a wake-up is pending already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
