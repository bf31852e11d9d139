package core

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"time"
)

// waitRoom parks the Client's waiters. Release channels are subscribed through shared pub/sub
// connections (feeds, see feeds.go): one for a plain client, one per master on a cluster, one per
// node for Redlock. Each channel has a FIFO queue of local waiters; each release message wakes one.
type waitRoom struct {
	router        router
	id            string // this client's id, as published in its release messages
	quorum        int    // Redlock: copies of a release message (one per node) that make a wake-up
	mu            sync.Mutex
	queues        map[string]*waitQueue
	feeds         map[string]*feed
	ops           []subOp
	seen          map[string]seenMsg // recent release messages (Redlock)
	refreshNeeded bool
	started       bool
	kick          chan struct{}
	closed        chan struct{} // closed by close: waiters return ErrClosed
	ctx           context.Context
	cancel        context.CancelFunc
	wg            sync.WaitGroup
	shut          bool
}

type seenMsg struct {
	copies int
	at     time.Time
}

type subOp struct {
	ch  string
	sub bool
}

type waitQueue struct {
	ch        string
	waiters   []*waiter
	ready     chan struct{} // closed when a server confirmed the subscription
	confirmed bool
	members   int // waiters that joined and did not leave, queued or not
	idleSince time.Time
	lostAt    time.Time // when a woken waiter last lost the lock to another process
}

type waiter struct {
	q       *waitQueue
	digest  string // fair mode: SHA-1 (hex) of the waiter's token, as release messages name it
	wake    chan struct{}
	inQueue bool
}

// clientIDPrefix marks non-fair release messages: their payload is the releasing client's id
// (followed by "/" and the released token on Redlock, so that the copies from each node can be
// told apart from a new release). Fair release messages carry the SHA-1 of the token of the waiter
// whose turn it is; empty ones wake the first waiter.
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

func newWaitRoom(rt router, id string, quorum int) *waitRoom {
	r := &waitRoom{router: rt, id: id, quorum: quorum, queues: make(map[string]*waitQueue),
		feeds: make(map[string]*feed), kick: make(chan struct{}, 1), closed: make(chan struct{})}
	if quorum > 0 {
		r.seen = make(map[string]seenMsg)
	}
	return r
}

// busy reports whether local waiters are waiting on ch; a newcomer then queues behind them.
func (r *waitRoom) busy(ch string) bool {
	r.mu.Lock()
	q := r.queues[ch]
	b := q != nil && q.members > 0
	r.mu.Unlock()
	return b
}

// join queues a waiter on ch, subscribing the channel if needed. It returns nil after close. A
// fair waiter is woken by the messages that name its token's digest.
func (r *waitRoom) join(ch, token string, fair bool) *waiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shut {
		return nil
	}
	if !r.started {
		r.started = true
		r.ctx, r.cancel = context.WithCancel(context.Background())
		r.wg.Add(1)
		go r.write()
	}
	q := r.queues[ch]
	if q == nil {
		q = &waitQueue{ch: ch, ready: make(chan struct{})}
		r.queues[ch] = q
		r.ops = append(r.ops, subOp{ch: ch, sub: true})
		r.poke()
	}
	w := &waiter{q: q, wake: make(chan struct{}, 1), inQueue: true}
	if fair {
		sum := sha1.Sum([]byte(token))
		w.digest = hex.EncodeToString(sum[:])
	}
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

// requeue puts w back at the head of its queue if a wake-up took it out. It reports whether w is
// first in its queue.
func (r *waitRoom) requeue(w *waiter) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := w.q
	if !w.inQueue {
		q.waiters = append(q.waiters, nil)
		copy(q.waiters[1:], q.waiters)
		q.waiters[0] = w
		w.inQueue = true
	}
	return q.waiters[0] == w
}

// leave removes w. A wake-up it received but did not use passes to the next waiter, and so does
// the head's polling duty when the head leaves without the lock (only the head polls; after an
// expiry no release message would wake the next one).
func (r *waitRoom) leave(w *waiter, acquired bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := w.q
	if !acquired && len(q.waiters) > 1 && q.waiters[0] == w {
		next := q.waiters[1]
		select {
		case next.wake <- struct{}{}:
		default:
		}
	}
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

// passOn wakes the first waiter of w's queue other than w.
func (r *waitRoom) passOn(w *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := w.q
	for i, x := range q.waiters {
		if x != w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			x.inQueue = false
			select {
			case x.wake <- struct{}{}:
			default:
			}
			return
		}
	}
}

// lostRace records that w, woken by a release, found the lock taken by another process.
func (r *waitRoom) lostRace(w *waiter) {
	r.mu.Lock()
	w.q.lostAt = time.Now()
	r.mu.Unlock()
}

// wakeOne wakes the waiter whose token digest is named, or the first one; the caller holds r.mu.
func (r *waitRoom) wakeOne(q *waitQueue, digest string) {
	i := 0
	if digest != "" {
		// Fair mode names the waiter whose turn it is; if it is not here, it is another process's.
		for i < len(q.waiters) && q.waiters[i].digest != digest {
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
	if r.quorum > 0 {
		// Redlock: every node publishes the release. Wake on the quorum-th copy, when a quorum of
		// nodes is free (an earlier attempt would fail), and ignore the rest.
		key := ch + "\x00" + payload
		n := r.seen[key]
		n.copies++
		if n.copies == 1 {
			n.at = time.Now()
		}
		r.seen[key] = n
		if n.copies != r.quorum {
			return
		}
	}
	if id, _, _ := strings.Cut(payload, "/"); id == r.id && time.Since(q.lostAt) < contestedFor {
		time.AfterFunc(yieldAfterOwnRelease, func() {
			r.mu.Lock()
			r.wakeOne(q, "")
			r.mu.Unlock()
		})
		return
	}
	r.wakeOne(q, "")
}

// confirm marks ch subscribed. A confirmation that follows a reconnect wakes the first waiter, as
// a release may have been missed while the connection was down.
func (r *waitRoom) confirm(ch string, reconnected bool) {
	r.mu.Lock()
	if q := r.queues[ch]; q != nil {
		if !q.confirmed {
			q.confirmed = true
			close(q.ready)
		} else if reconnected {
			r.wakeOne(q, "")
		}
	}
	r.mu.Unlock()
}

// write runs the subscription commands in order, sweeps idle channels and retries what failed.
func (r *waitRoom) write() {
	defer r.wg.Done()
	sweep := time.NewTicker(idleAfter)
	defer sweep.Stop()
	retry := time.NewTicker(feedRetry)
	defer retry.Stop()
	var pending []subOp
	for {
		select {
		case <-r.kick:
		case <-sweep.C:
			r.sweep()
		case <-retry.C:
		case <-r.ctx.Done():
			return
		}
		r.mu.Lock()
		ops := append(pending, r.ops...)
		r.ops = nil
		refresh := r.refreshNeeded
		r.refreshNeeded = false
		r.mu.Unlock()
		if refresh {
			r.router.refresh(r.ctx)
		}
		pending = r.apply(ops)
	}
}

// sweep unsubscribes channels that had no waiters for idleAfter, and forgets old release messages.
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
	for k, m := range r.seen {
		if now.Sub(m.at) > idleAfter {
			delete(r.seen, k)
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
	started := r.started
	var feeds []*feed
	for _, f := range r.feeds {
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		feeds = append(feeds, f)
	}
	r.mu.Unlock()
	if started {
		r.cancel()
		for _, f := range feeds {
			_ = f.ps.Close()
		}
		r.wg.Wait()
	}
}
