package core

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// router decides where release channels are subscribed: one connection for a plain or Sentinel
// client, the owning master's connection for each channel on a cluster (sharded pub/sub), every
// node's connection for Redlock (each node publishes the release).
type router interface {
	// route returns the keys of the feeds ch must be subscribed on.
	route(ctx context.Context, ch string) ([]string, error)
	// open returns a new, empty subscription for a feed key.
	open(ctx context.Context, key string) *redis.PubSub
	sharded() bool
	// refresh is called when a feed broke (e.g. a cluster failover): reload topology.
	refresh(ctx context.Context)
}

// feed is one pub/sub connection and the channels subscribed on it.
type feed struct {
	key    string
	ps     *redis.PubSub
	chans  map[string]struct{}
	mu     sync.Mutex
	failed bool // it lost its connection at least once: re-confirmations mean missed messages
	closed bool
}

const (
	feedPing    = 5 * time.Second // a silent feed is pinged after this long
	feedRetry   = time.Second     // how often undelivered subscriptions are retried
	feedMaxWait = time.Second     // read backoff cap after errors
)

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

// read delivers f's messages until the room stops or f breaks.
func (r *waitRoom) read(f *feed) {
	defer r.wg.Done()
	backoff := 10 * time.Millisecond
	pinged := false
	for {
		msg, err := f.ps.ReceiveTimeout(r.ctx, feedPing)
		if r.ctx.Err() != nil || f.isClosed() {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if pinged { // no answer to the ping: the connection is dead (paused or partitioned server)
					r.broken(f)
					return
				}
				pinged = true
				_ = f.ps.Ping(r.ctx)
				continue
			}
			f.markFailed()
			if r.router.sharded() { // the slot may have moved: subscribe again where it lives now
				r.broken(f)
				return
			}
			if !sleepCtx(r.ctx, backoff) {
				return
			}
			backoff = min(backoff*2, feedMaxWait)
			continue
		}
		backoff, pinged = 10*time.Millisecond, false
		switch m := msg.(type) {
		case *redis.Message:
			r.deliver(m.Channel, m.Payload)
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				r.confirm(m.Channel, f.hadFailed())
			case "sunsubscribe":
				r.moved(f, m.Channel)
			}
		}
	}
}

func (f *feed) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
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
func (r *waitRoom) broken(f *feed) {
	r.mu.Lock()
	if r.feeds[f.key] == f {
		delete(r.feeds, f.key)
	}
	f.mu.Lock()
	f.closed = true
	chans := f.chans
	f.mu.Unlock()
	for ch := range chans {
		r.ops = append(r.ops, subOp{ch: ch, sub: true})
		if q := r.queues[ch]; q != nil {
			r.wakeOne(q, "")
		}
	}
	r.refreshNeeded = true
	r.poke()
	r.mu.Unlock()
	_ = f.ps.Close()
}

// moved handles a shard channel the server unsubscribed us from (its slot moved, e.g. after a
// failover) while we still want it: subscribe it again where it lives now, and wake its first
// waiter. Our own SUNSUBSCRIBEs are not affected: apply removes the channel from f first.
func (r *waitRoom) moved(f *feed, ch string) {
	f.mu.Lock()
	_, wanted := f.chans[ch]
	delete(f.chans, ch)
	f.mu.Unlock()
	if !wanted {
		return
	}
	r.mu.Lock()
	if q := r.queues[ch]; q != nil {
		r.ops = append(r.ops, subOp{ch: ch, sub: true})
		r.wakeOne(q, "")
	}
	r.refreshNeeded = true
	r.poke()
	r.mu.Unlock()
}

// feedFor returns the feed for key, opening it (and its reader) if needed. The caller holds r.mu.
func (r *waitRoom) feedFor(key string) *feed {
	if f := r.feeds[key]; f != nil {
		return f
	}
	f := &feed{key: key, ps: r.router.open(r.ctx, key), chans: make(map[string]struct{})}
	r.feeds[key] = f
	r.wg.Add(1)
	go r.read(f)
	return f
}

// apply sends pending (un)subscriptions; it runs on the writer goroutine only, so commands for a
// channel go out in the order they were queued.
func (r *waitRoom) apply(ops []subOp) (retry []subOp) {
	for _, op := range ops {
		if !op.sub {
			r.mu.Lock()
			var fs []*feed
			for _, f := range r.feeds {
				f.mu.Lock()
				if _, ok := f.chans[op.ch]; ok {
					delete(f.chans, op.ch)
					fs = append(fs, f)
				}
				f.mu.Unlock()
			}
			r.mu.Unlock()
			for _, f := range fs {
				if r.router.sharded() {
					_ = f.ps.SUnsubscribe(r.ctx, op.ch)
				} else {
					_ = f.ps.Unsubscribe(r.ctx, op.ch)
				}
			}
			continue
		}
		rctx, cancel := context.WithTimeout(r.ctx, time.Second)
		keys, err := r.router.route(rctx, op.ch)
		cancel()
		if err != nil {
			retry = append(retry, op)
			continue
		}
		for _, key := range keys {
			r.mu.Lock()
			if r.queues[op.ch] == nil { // unsubscribed meanwhile
				r.mu.Unlock()
				break
			}
			f := r.feedFor(key)
			f.mu.Lock()
			_, had := f.chans[op.ch]
			f.chans[op.ch] = struct{}{}
			f.mu.Unlock()
			r.mu.Unlock()
			if had {
				continue
			}
			// Errors need no handling: go-redis records the channel and subscribes it again when it
			// reconnects; a broken feed is rebuilt; waiters fall back to their backoff meanwhile.
			if r.router.sharded() {
				_ = f.ps.SSubscribe(r.ctx, op.ch)
			} else {
				_ = f.ps.Subscribe(r.ctx, op.ch)
			}
		}
	}
	return retry
}

// plainRouter subscribes everything on one connection of a plain or Sentinel client.
type plainRouter struct{ rdb redis.UniversalClient }

func (p plainRouter) route(context.Context, string) ([]string, error)  { return []string{""}, nil }
func (p plainRouter) open(ctx context.Context, _ string) *redis.PubSub { return p.rdb.Subscribe(ctx) }
func (p plainRouter) sharded() bool                                    { return false }
func (p plainRouter) refresh(context.Context)                          {}

// clusterRouter subscribes each channel on the master that owns its slot (SSUBSCRIBE).
type clusterRouter struct{ rdb *redis.ClusterClient }

func (c clusterRouter) route(ctx context.Context, ch string) ([]string, error) {
	m, err := c.rdb.MasterForKey(ctx, ch)
	if err != nil {
		return nil, err
	}
	return []string{m.Options().Addr}, nil
}

// open returns a sharded subscription; go-redis connects it to the master of the first channel
// subscribed, which route chose.
func (c clusterRouter) open(ctx context.Context, _ string) *redis.PubSub {
	return c.rdb.SSubscribe(ctx)
}
func (c clusterRouter) sharded() bool               { return true }
func (c clusterRouter) refresh(ctx context.Context) { c.rdb.ReloadState(ctx) }

// fanRouter subscribes every channel on every node (Redlock).
type fanRouter struct {
	nodes []redis.UniversalClient
	keys  []string
}

func newFanRouter(nodes []redis.UniversalClient) fanRouter {
	f := fanRouter{nodes: nodes}
	for i := range nodes {
		f.keys = append(f.keys, strconv.Itoa(i))
	}
	return f
}

func (f fanRouter) route(context.Context, string) ([]string, error) { return f.keys, nil }
func (f fanRouter) open(ctx context.Context, key string) *redis.PubSub {
	i, _ := strconv.Atoi(key)
	return f.nodes[i].Subscribe(ctx)
}
func (f fanRouter) sharded() bool           { return false }
func (f fanRouter) refresh(context.Context) {}
