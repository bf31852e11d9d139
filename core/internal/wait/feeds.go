package wait

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriber keeps the pub/sub subscriptions of the channels that have waiters, and hands their
// messages to the queues: one connection for a plain client, one per master on a cluster, one per
// node for Redlock (each a feed). A writer goroutine sends (un)subscriptions in order and retries
// what failed; a reader goroutine per feed delivers messages. They start with the first channel.
type subscriber struct {
	router Router
	q      sink
	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // guards what follows
	feeds  map[string]*feed
	wanted map[string]struct{} // channels that have waiters
	ops    []subOp
	reload bool // a feed broke: reload the topology before subscribing again
	start  bool
	shut   bool
}

type subOp struct {
	ch  string
	sub bool
}

// feed is one pub/sub connection and the channels subscribed on it.
type feed struct {
	key    string
	ps     *redis.PubSub
	mu     sync.Mutex
	chans  map[string]struct{}
	failed bool // it lost its connection at least once: re-confirmations mean missed messages
	closed bool
}

const (
	feedPing    = 5 * time.Second // a silent feed is pinged after this long
	feedRetry   = time.Second     // how often undelivered subscriptions are retried
	feedMaxWait = time.Second     // read backoff cap after errors
)

// sink receives what the subscriptions hear (the Client's waitQueues).
type sink interface {
	// deliver hands a message on ch to the channel's waiters.
	deliver(ch, payload string)
	// confirm says that ch is subscribed (again, after a reconnection: messages may be lost).
	confirm(ch string, reconnected bool)
	// missed says that ch's subscription broke: its waiters must not count on messages.
	missed(ch string)
	// sweep lets the waiters of idle channels go (called now and then).
	sweep(now time.Time)
}

func newSubscriber(rt Router, q sink) *subscriber {
	return &subscriber{router: rt, q: q, kick: make(chan struct{}, 1), feeds: make(map[string]*feed),
		wanted: make(map[string]struct{})}
}

// want subscribes ch.
func (s *subscriber) want(ch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		return
	}
	if !s.start {
		s.start = true
		s.ctx, s.cancel = context.WithCancel(context.Background())
		s.wg.Add(1)
		go s.write()
	}
	s.wanted[ch] = struct{}{}
	s.ops = append(s.ops, subOp{ch: ch, sub: true})
	signal(s.kick)
}

// unwant unsubscribes chs.
func (s *subscriber) unwant(chs []string) {
	if len(chs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range chs {
		delete(s.wanted, ch)
		s.ops = append(s.ops, subOp{ch: ch})
	}
	signal(s.kick)
}

func (f *feed) markFailed() {
	f.mu.Lock()
	f.failed = true
	f.mu.Unlock()
}

func (f *feed) hadFailed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *feed) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// write runs the subscription commands in order, sweeps idle queues and retries what failed.
func (s *subscriber) write() {
	defer s.wg.Done()
	sweep := time.NewTicker(idleAfter)
	defer sweep.Stop()
	retry := time.NewTicker(feedRetry)
	defer retry.Stop()
	var pending []subOp
	for {
		select {
		case <-s.kick:
		case now := <-sweep.C:
			s.q.sweep(now)
		case <-retry.C:
		case <-s.ctx.Done():
			return
		}
		s.mu.Lock()
		ops := append(pending, s.ops...)
		s.ops = nil
		reload := s.reload
		s.reload = false
		s.mu.Unlock()
		if reload {
			s.router.refresh(s.ctx)
		}
		pending = s.apply(ops)
	}
}

// read delivers f's messages until the subscriber stops or f breaks.
func (s *subscriber) read(f *feed) {
	defer s.wg.Done()
	backoff := 10 * time.Millisecond
	pinged := false
	for {
		msg, err := f.ps.ReceiveTimeout(s.ctx, feedPing)
		if s.ctx.Err() != nil || f.isClosed() {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if pinged { // no answer to the ping: the connection is dead (paused or partitioned server)
					s.broken(f)
					return
				}
				pinged = true
				_ = f.ps.Ping(s.ctx)
				continue
			}
			f.markFailed()
			if s.router.Sharded() { // the slot may have moved: subscribe again where it lives now
				s.broken(f)
				return
			}
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
				s.q.confirm(m.Channel, f.hadFailed())
			case "sunsubscribe":
				s.moved(f, m.Channel)
			}
		}
	}
}

// Sleep waits for d; it reports false when ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// broken retires f: its channels are subscribed again through the router, and their waiters are
// woken, as releases may have been missed.
func (s *subscriber) broken(f *feed) {
	s.mu.Lock()
	if s.feeds[f.key] == f {
		delete(s.feeds, f.key)
	}
	f.mu.Lock()
	f.closed = true
	chans := f.chans
	f.mu.Unlock()
	var missed []string
	for ch := range chans {
		if _, ok := s.wanted[ch]; ok {
			s.ops = append(s.ops, subOp{ch: ch, sub: true})
			missed = append(missed, ch)
		}
	}
	s.reload = true
	signal(s.kick)
	s.mu.Unlock()
	_ = f.ps.Close()
	for _, ch := range missed {
		s.q.missed(ch)
	}
}

// moved handles a shard channel the server unsubscribed us from (its slot moved, e.g. after a
// failover) while we still want it: subscribe it again where it lives now, and wake its first
// waiter. Our own SUNSUBSCRIBEs are not affected: apply removes the channel from f first.
func (s *subscriber) moved(f *feed, ch string) {
	f.mu.Lock()
	_, subscribed := f.chans[ch]
	delete(f.chans, ch)
	f.mu.Unlock()
	if !subscribed {
		return
	}
	s.mu.Lock()
	_, wanted := s.wanted[ch]
	if wanted {
		s.ops = append(s.ops, subOp{ch: ch, sub: true})
	}
	s.reload = true
	signal(s.kick)
	s.mu.Unlock()
	if wanted {
		s.q.missed(ch)
	}
}

// feedFor returns the feed for key, opening it (and its reader) if needed; the caller holds s.mu.
func (s *subscriber) feedFor(key string) *feed {
	if f := s.feeds[key]; f != nil {
		return f
	}
	f := &feed{key: key, ps: s.router.open(s.ctx, key), chans: make(map[string]struct{})}
	s.feeds[key] = f
	s.wg.Add(1)
	go s.read(f)
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
			f.mu.Lock()
			_, had := f.chans[op.ch]
			f.chans[op.ch] = struct{}{}
			f.mu.Unlock()
			s.mu.Unlock()
			if had {
				continue
			}
			// Errors need no handling: go-redis records the channel and subscribes it again when it
			// reconnects; a broken feed is rebuilt; waiters fall back to their backoff meanwhile.
			if s.router.Sharded() {
				_ = f.ps.SSubscribe(s.ctx, op.ch)
			} else {
				_ = f.ps.Subscribe(s.ctx, op.ch)
			}
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
		f.mu.Lock()
		if _, ok := f.chans[ch]; ok {
			delete(f.chans, ch)
			fs = append(fs, f)
		}
		f.mu.Unlock()
	}
	s.mu.Unlock()
	for _, f := range fs {
		if s.router.Sharded() {
			_ = f.ps.SUnsubscribe(s.ctx, ch)
		} else {
			_ = f.ps.Unsubscribe(s.ctx, ch)
		}
	}
}

// close stops the goroutines and closes the feeds.
func (s *subscriber) close() {
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		return
	}
	s.shut = true
	started := s.start
	var feeds []*feed
	for _, f := range s.feeds {
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		feeds = append(feeds, f)
	}
	s.mu.Unlock()
	if started {
		s.cancel()
		for _, f := range feeds {
			_ = f.ps.Close()
		}
		s.wg.Wait()
	}
}

// signal wakes whoever waits on c, unless a wake-up is pending already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
