package core

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// waitRoom parks the Client's waiters. It owns one pub/sub connection for all release channels: a
// reader goroutine delivers messages, a writer goroutine sends (UN)SUBSCRIBE in order. Each channel
// has a FIFO queue of local waiters and each release message wakes one of them.
type waitRoom struct {
	st     store
	id     string // this client's id, as published in its release messages
	mu     sync.Mutex
	queues map[string]*waitQueue
	ops    []subOp
	ps     *redis.PubSub
	kick   chan struct{}
	closed chan struct{} // closed by close: waiters return ErrClosed
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	shut   bool
}

type subOp struct {
	ch  string
	sub bool
}

type waitQueue struct {
	ch        string
	waiters   []*waiter
	ready     chan struct{} // closed when the server confirmed the subscription
	confirmed bool
	members   int // waiters that joined and did not leave, queued or not
	idleSince time.Time
	lostAt    time.Time // when a woken waiter last lost the lock to another process
}

type waiter struct {
	q       *waitQueue
	token   string
	wake    chan struct{}
	inQueue bool
}

// clientIDPrefix marks non-fair release messages: their payload is the releasing client's id.
// Fair release messages carry the token of the waiter whose turn it is; empty ones wake the head.
const clientIDPrefix = "c:"

// yieldAfterOwnRelease is how long a client's next waiter lets other processes go first after this
// client released, when its waiters have recently lost races to other processes. It turns the
// random race between processes' queue heads into an alternation, which bounds the wait tail.
const (
	yieldAfterOwnRelease = 300 * time.Microsecond
	contestedFor         = time.Second
)

// idleAfter is how long a channel without waiters stays subscribed, to spare SUBSCRIBE/UNSUBSCRIBE
// churn on locks that are contended on and off.
const idleAfter = 3 * time.Second

func newWaitRoom(st store, id string) *waitRoom {
	return &waitRoom{st: st, id: id, queues: make(map[string]*waitQueue), kick: make(chan struct{}, 1),
		closed: make(chan struct{})}
}

// busy reports whether local waiters are waiting on ch; a newcomer then queues behind them.
func (r *waitRoom) busy(ch string) bool {
	r.mu.Lock()
	q := r.queues[ch]
	b := q != nil && q.members > 0
	r.mu.Unlock()
	return b
}

// join queues a waiter on ch, subscribing the channel if needed. It returns nil after close.
func (r *waitRoom) join(ch, token string) *waiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shut {
		return nil
	}
	if r.ps == nil {
		r.ctx, r.cancel = context.WithCancel(context.Background())
		r.ps = r.st.pubsub(r.ctx)
		r.wg.Add(2)
		go r.read()
		go r.write()
	}
	q := r.queues[ch]
	if q == nil {
		q = &waitQueue{ch: ch, ready: make(chan struct{})}
		r.queues[ch] = q
		r.ops = append(r.ops, subOp{ch: ch, sub: true})
		r.poke()
	}
	w := &waiter{q: q, token: token, wake: make(chan struct{}, 1), inQueue: true}
	q.waiters = append(q.waiters, w)
	q.members++
	return w
}

func (r *waitRoom) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// requeue puts w back at the head of its queue if a wake-up took it out.
func (r *waitRoom) requeue(w *waiter) {
	r.mu.Lock()
	if !w.inQueue {
		q := w.q
		q.waiters = append(q.waiters, nil)
		copy(q.waiters[1:], q.waiters)
		q.waiters[0] = w
		w.inQueue = true
	}
	r.mu.Unlock()
}

// leave removes w. A wake-up it received but did not use passes to the next waiter.
func (r *waitRoom) leave(w *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := w.q
	if w.inQueue {
		for i, x := range q.waiters {
			if x == w {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				break
			}
		}
		w.inQueue = false
	}
	select {
	case <-w.wake:
		r.wakeOne(q, "")
	default:
	}
	q.members--
	if q.members == 0 {
		q.idleSince = time.Now()
	}
}

// wakeOne wakes the waiter whose token is named, or the first one; the caller holds r.mu.
func (r *waitRoom) wakeOne(q *waitQueue, token string) {
	i := 0
	if token != "" {
		// Fair mode names the waiter whose turn it is; if it is not here, it is another process's.
		for i < len(q.waiters) && q.waiters[i].token != token {
			i++
		}
	}
	if i >= len(q.waiters) {
		return
	}
	w := q.waiters[i]
	q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
	w.inQueue = false
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (r *waitRoom) deliver(ch, payload string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queues[ch]
	if q == nil {
		return
	}
	if !strings.HasPrefix(payload, clientIDPrefix) {
		r.wakeOne(q, payload)
		return
	}
	if payload == r.id && time.Since(q.lostAt) < contestedFor {
		time.AfterFunc(yieldAfterOwnRelease, func() {
			r.mu.Lock()
			r.wakeOne(q, "")
			r.mu.Unlock()
		})
		return
	}
	r.wakeOne(q, "")
}

// lostRace records that w, woken by a release, found the lock taken by another process.
func (r *waitRoom) lostRace(w *waiter) {
	r.mu.Lock()
	w.q.lostAt = time.Now()
	r.mu.Unlock()
}

func (r *waitRoom) confirm(ch string) {
	r.mu.Lock()
	if q := r.queues[ch]; q != nil {
		if !q.confirmed {
			q.confirmed = true
			close(q.ready)
		} else if len(q.waiters) > 0 {
			// Resubscribed after a reconnect: a release may have been missed meanwhile.
			r.wakeOne(q, "")
		}
	}
	r.mu.Unlock()
}

func (r *waitRoom) read() {
	defer r.wg.Done()
	backoff := 10 * time.Millisecond
	for {
		msg, err := r.ps.Receive(r.ctx)
		if r.ctx.Err() != nil {
			return
		}
		if err != nil {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-r.ctx.Done():
				t.Stop()
				return
			}
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Message:
			r.deliver(m.Channel, m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				r.confirm(m.Channel)
			}
		}
	}
}

func (r *waitRoom) write() {
	defer r.wg.Done()
	tick := time.NewTicker(idleAfter)
	defer tick.Stop()
	for {
		select {
		case <-r.kick:
		case <-tick.C:
			r.sweep()
		case <-r.ctx.Done():
			return
		}
		r.mu.Lock()
		ops := r.ops
		r.ops = nil
		r.mu.Unlock()
		var sub, unsub []string
		for _, op := range ops {
			if op.sub {
				sub = append(sub, op.ch)
			} else {
				unsub = append(unsub, op.ch)
			}
		}
		// Errors need no handling here: go-redis records the channels and subscribes them again
		// when it reconnects; waiters fall back to their backoff meanwhile.
		if len(unsub) > 0 {
			if r.st.sharded() {
				_ = r.ps.SUnsubscribe(r.ctx, unsub...)
			} else {
				_ = r.ps.Unsubscribe(r.ctx, unsub...)
			}
		}
		if len(sub) > 0 {
			if r.st.sharded() {
				_ = r.ps.SSubscribe(r.ctx, sub...)
			} else {
				_ = r.ps.Subscribe(r.ctx, sub...)
			}
		}
	}
}

// sweep unsubscribes channels that had no waiters for idleAfter.
func (r *waitRoom) sweep() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for ch, q := range r.queues {
		if q.members == 0 && now.Sub(q.idleSince) >= idleAfter {
			delete(r.queues, ch)
			r.ops = append(r.ops, subOp{ch: ch})
		}
	}
	if len(r.ops) > 0 {
		r.poke()
	}
}

// close wakes every waiter with ErrClosed and stops the goroutines.
func (r *waitRoom) close() {
	r.mu.Lock()
	if r.shut {
		r.mu.Unlock()
		return
	}
	r.shut = true
	close(r.closed)
	ps := r.ps
	r.mu.Unlock()
	if ps != nil {
		r.cancel()
		_ = ps.Close()
		r.wg.Wait()
	}
}
