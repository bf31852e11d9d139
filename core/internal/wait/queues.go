package wait

import (
	"strings"
	"sync"
	"time"
)

// The wait path has three parts, each on its own:
//
//   - Queues (this file): the Client's waiters, a FIFO queue per release channel, and the rules
//     for whom a release message wakes;
//   - subscriber (feeds.go): the pub/sub connections that deliver release messages to the queues;
//   - quorumCopies (quorum_copies.go): Redlock's counting of the copies of one release that its nodes publish.
//
// Lock order: Queues.mu, then subscriber.mu, then a feed's mu. The subscriber never calls into
// the queues while it holds a mutex of its own.

// Queues parks the Client's waiters. Each release channel has a FIFO queue of local waiters;
// each release message wakes one.
type Queues struct {
	id     string        // this client's id, as published in its release messages
	subs   *subscriber   // subscribes the channels that have waiters
	copies *quorumCopies // Redlock only
	closed chan struct{} // closed by close: waiters return ErrClosed
	mu     sync.Mutex    // guards what follows
	queues map[string]*waitQueue
	shut   bool
	yield  time.Duration // yieldAfterOwnRelease (tests lengthen it to tell a yield from a wake)
}

type waitQueue struct {
	ch        string
	waiters   []*Waiter
	ready     chan struct{} // closed when a server confirmed the subscription
	confirmed bool
	members   int // waiters that joined and did not leave, queued or not
	idleSince time.Time
	lostAt    time.Time          // when a woken waiter last found the lock taken again
	foreignAt time.Time          // when another client's release was last delivered
	named     map[string]*Waiter // members with a digest, queued or not (permit grants find them)
	unnamed   int                // members waiting for their digest (learnDigest)
	unclaimed []string           // messages naming a digest no member has, while some are unnamed
}

// Waiter is one waiting call of the Client, queued on the release channel of its lock.
type Waiter struct {
	q       *waitQueue
	digest  string // fair mode and permits: SHA-1 (hex) of the waiter's token, as messages name it
	unnamed bool   // fair mode and permits: the digest is not known yet (named)
	wake    chan struct{}
	inQueue bool
	grant   Grant // a lock or permit a release granted it (grant.go)
}

// Wake is signalled when a release (or a grant) wakes w.
func (w *Waiter) Wake() <-chan struct{} { return w.wake }

// Ready is closed once a server confirmed the subscription of w's channel.
func (w *Waiter) Ready() <-chan struct{} { return w.q.ready }

// Channel is the release channel w waits on.
func (w *Waiter) Channel() string { return w.q.ch }

// Unnamed reports whether w, a fair or permit waiter, does not know its token's digest yet.
func (w *Waiter) Unnamed() bool { return w.unnamed }

// ClientIDPrefix marks non-fair release messages: their payload is the releasing client's id
// (followed by "/" and the released token on Redlock, so that the copies from each node can be
// told apart from a new release). Fair release messages carry the SHA-1 of the token of the waiter
// whose turn it is; empty ones wake the first waiter.
const ClientIDPrefix = "c:"

// yieldAfterOwnRelease is how long a client's next waiter lets other processes go first after this
// client released, when its waiters have recently lost races and another client has recently
// released the lock too (so other processes contend for it). It turns the random race between
// processes' queue heads into an alternation, which bounds the wait tail. A lock contended only
// by this client's waiters never yields: nobody would take the turn, and the timer (which a loaded
// host fires milliseconds late) would only stall the handoff.
const (
	yieldAfterOwnRelease = 300 * time.Microsecond
	contestedFor         = time.Second
)

// idleAfter is how long a channel without waiters stays subscribed, to spare SUBSCRIBE/UNSUBSCRIBE
// churn on locks that are contended on and off.
const idleAfter = 3 * time.Second

// NewQueues returns the queues of the Client whose release messages carry id; quorum > 0 counts
// a release as heard once that many of Redlock's nodes published it (rt subscribes every node).
func NewQueues(rt Router, id string, quorum int) *Queues {
	q := &Queues{id: id, queues: make(map[string]*waitQueue), closed: make(chan struct{}), yield: yieldAfterOwnRelease}
	if quorum > 0 {
		q.copies = &quorumCopies{need: quorum, seen: make(map[string]seenMsg)}
	}
	q.subs = newSubscriber(rt, q)
	return q
}

// Busy reports whether local waiters are waiting on ch; a newcomer then queues behind them.
func (r *Queues) Busy(ch string) bool {
	r.mu.Lock()
	q := r.queues[ch]
	b := q != nil && q.members > 0
	r.mu.Unlock()
	return b
}

// Join queues a waiter on ch, subscribing the channel if needed. It returns nil after close. A
// fair waiter is woken by the messages that name its token's digest, once it is named with it
// (named); digest is that digest when the caller knows it already.
func (r *Queues) Join(ch, digest string, fair bool) *Waiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shut {
		return nil
	}
	q := r.queues[ch]
	if q == nil {
		q = &waitQueue{ch: ch, ready: make(chan struct{})}
		r.queues[ch] = q
		r.subs.want(ch)
	}
	w := &Waiter{q: q, wake: make(chan struct{}, 1), inQueue: true}
	if fair {
		w.digest = digest
		if digest == "" {
			w.unnamed = true
			q.unnamed++
		}
	}
	q.waiters = append(q.waiters, w)
	q.members++
	q.name(w)
	return w
}

// Requeue puts w back at the head of its queue if a wake-up took it out. It reports whether w is
// first in its queue.
func (r *Queues) Requeue(w *Waiter) bool {
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

// Leave removes w. A wake-up it received but did not use passes to the next waiter, and so does
// the head's polling duty when the head leaves without the lock (only the head polls; after an
// expiry no release message would wake the next one).
func (r *Queues) Leave(w *Waiter, acquired bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := w.q
	if !acquired && len(q.waiters) > 1 && q.waiters[0] == w {
		signal(q.waiters[1].wake)
	}
	if w.inQueue {
		q.remove(w)
	}
	q.unname(w)
	if w.unnamed {
		w.unnamed = false
		q.forgetUnclaimed()
	}
	select {
	case <-w.wake:
		q.wakeOne("")
	default:
	}
	q.members--
	if q.members == 0 {
		q.idleSince = time.Now()
	}
}

// PassOn wakes the first waiter of w's queue other than w.
func (r *Queues) PassOn(w *Waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range w.q.waiters {
		if x != w {
			w.q.remove(x)
			signal(x.wake)
			return
		}
	}
}

// LostRace records that w, woken by a release, found the lock taken (by another process, or by
// this client's own holder: the reply does not say whose).
func (r *Queues) LostRace(w *Waiter) {
	r.mu.Lock()
	w.q.lostAt = time.Now()
	r.mu.Unlock()
}

// remove takes w out of q; the caller holds the queues' mutex.
func (q *waitQueue) remove(w *Waiter) {
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	w.inQueue = false
}

// wakeOne wakes the waiter whose token digest is named, or the first one; the caller holds the
// queues' mutex.
func (q *waitQueue) wakeOne(digest string) {
	i := 0
	if digest != "" {
		// Fair mode names the waiter whose turn it is; if it is not here, it is another process's
		// (or one of this Client's that does not know its digest yet: named).
		for i < len(q.waiters) && q.waiters[i].digest != digest {
			i++
		}
	}
	if i >= len(q.waiters) {
		if digest != "" && q.named[digest] == nil {
			q.keepUnclaimed(digest)
		}
		return
	}
	w := q.waiters[i]
	q.remove(w)
	signal(w.wake)
}

// deliver handles a release message on ch (called by the subscriber).
func (r *Queues) deliver(ch, payload string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queues[ch]
	if q == nil {
		return
	}
	if strings.HasPrefix(payload, grantPrefix) {
		q.granted(payload)
		return
	}
	if !strings.HasPrefix(payload, ClientIDPrefix) {
		q.wakeOne(payload)
		return
	}
	if r.copies != nil && !r.copies.count(ch, payload) {
		return
	}
	id, _, _ := strings.Cut(payload, "/")
	if id != r.id {
		q.foreignAt = time.Now()
	} else if time.Since(q.lostAt) < contestedFor && time.Since(q.foreignAt) < contestedFor {
		time.AfterFunc(r.yield, func() {
			r.mu.Lock()
			q.wakeOne("")
			r.mu.Unlock()
		})
		return
	}
	q.wakeOne("")
}

// confirm marks ch subscribed (called by the subscriber). A confirmation that follows a reconnect
// wakes the first waiter, as a release may have been missed while the connection was down.
func (r *Queues) confirm(ch string, reconnected bool) {
	r.mu.Lock()
	if q := r.queues[ch]; q != nil {
		if !q.confirmed {
			q.confirmed = true
			close(q.ready)
		} else if reconnected {
			q.wakeOne("")
		}
	}
	r.mu.Unlock()
}

// missed wakes the first waiter of ch: its subscription broke or moved, and a release may have been
// missed (called by the subscriber).
func (r *Queues) missed(ch string) {
	r.mu.Lock()
	if q := r.queues[ch]; q != nil {
		q.wakeOne("")
	}
	r.mu.Unlock()
}

// sweep forgets the queues that had no waiters for idleAfter and stops subscribing their channels.
func (r *Queues) sweep(now time.Time) {
	r.mu.Lock()
	var idle []string
	for ch, q := range r.queues {
		if q.members == 0 && now.Sub(q.idleSince) >= idleAfter {
			delete(r.queues, ch)
			idle = append(idle, ch)
		}
	}
	if r.copies != nil {
		r.copies.sweep(now)
	}
	r.mu.Unlock()
	r.subs.unwant(idle)
}

// Closed is closed by Close: waiters return ErrClosed.
func (r *Queues) Closed() <-chan struct{} { return r.closed }

// Close wakes every waiter with ErrClosed and stops the subscriber.
func (r *Queues) Close() {
	r.mu.Lock()
	if r.shut {
		r.mu.Unlock()
		return
	}
	r.shut = true
	close(r.closed)
	r.mu.Unlock()
	r.subs.close()
}

// Parked counts the waiters (tests).
func (r *Queues) Parked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, q := range r.queues {
		n += q.members
	}
	return n
}

// name records w under its digest, queued or not, so that a grant finds it while it makes an
// attempt too; the caller holds the queues' mutex.
func (q *waitQueue) name(w *Waiter) {
	if w.digest == "" {
		return
	}
	if q.named == nil {
		q.named = make(map[string]*Waiter)
	}
	q.named[w.digest] = w
}

// unname forgets w's digest; the caller holds the queues' mutex.
func (q *waitQueue) unname(w *Waiter) {
	if w.digest != "" && q.named[w.digest] == w {
		delete(q.named, w.digest)
	}
}

// granted hands a grant message to the waiter it names, if it is this Client's, and wakes it; the
// caller holds the queues' mutex.
func (q *waitQueue) granted(payload string) {
	digest, g := parseGrant(payload)
	w := q.named[digest]
	if g.OK && w == nil {
		q.keepUnclaimed(payload)
	}
	if !g.OK || w == nil {
		return
	}
	w.grant = g
	if w.inQueue {
		q.remove(w)
	}
	signal(w.wake)
}

// Subscribed reports whether this Client has ch subscribed already (confirmed by the server).
func (r *Queues) Subscribed(ch string) bool {
	r.mu.Lock()
	q := r.queues[ch]
	ok := q != nil && q.confirmed
	r.mu.Unlock()
	return ok
}

// TakeGrant returns and forgets the grant w received, if any; the wake-up that came with it is
// used up too (it must not pass to another waiter).
func (r *Queues) TakeGrant(w *Waiter) Grant {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := w.grant
	w.grant = Grant{}
	if g.OK {
		select {
		case <-w.wake:
		default:
		}
	}
	return g
}
