package wait

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Lock order: Queues.mu, then subscriber.mu. The subscriber never calls into the queues while it
// holds its mutex.

// Queues parks the Client's waiters. Each release channel has a FIFO queue of local waiters;
// each release message wakes one.
type Queues struct {
	id     string        // this client's id, as published in its release messages
	subs   *subscriber   // subscribes the channels that have waiters
	copies *quorumCopies // Redlock only
	closed chan struct{} // closed by Close: waiters return ErrClosed
	once   sync.Once     // for Close
	mu     sync.Mutex    // guards what follows
	queues map[string]*waitQueue
	yield  time.Duration // yieldAfterOwnRelease (tests lengthen it to tell a yield from a wake)
}

type waitQueue struct {
	ch        string
	waiters   []*Waiter
	ready     chan struct{} // closed when a server confirmed the subscription
	members   int           // waiters that joined and did not leave, queued or not
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
	grant   Grant // a lock or permit a release granted it (grant.go)
}

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
// client released, when its waiters recently lost races and another client recently released the
// lock too (other processes contend for it): the random race between processes' queue heads turns
// into an alternation, which bounds the wait tail. A lock only this client's waiters contend never
// yields: nobody would take the turn, and the timer (late on a loaded host) would stall handoff.
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
	defer r.mu.Unlock()
	q := r.queues[ch]
	return q != nil && q.members > 0
}

// Join queues a waiter on ch, subscribing the channel if needed; nil after Close. A fair waiter is
// woken by the messages that name its token's digest: digest, or the one Named gives it later.
func (r *Queues) Join(ch, digest string, fair bool) *Waiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if poll(r.closed) {
		return nil
	}

	q := r.queues[ch]
	if q == nil {
		q = &waitQueue{ch: ch, ready: make(chan struct{}), named: map[string]*Waiter{}}
		r.queues[ch] = q
		r.subs.want(ch, true)
	}

	w := &Waiter{q: q, wake: make(chan struct{}, 1), unnamed: fair && digest == ""}
	if w.unnamed {
		q.unnamed++
	} else if fair {
		w.digest = digest
		q.named[digest] = w // so that a grant finds it while it makes an attempt too
	}
	q.waiters = append(q.waiters, w)
	q.members++
	return w
}

// Requeue puts w back at the head of its queue if a wake-up took it out. It reports whether w is
// first in its queue.
func (r *Queues) Requeue(w *Waiter) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := w.q
	if !slices.Contains(q.waiters, w) {
		q.waiters = slices.Insert(q.waiters, 0, w)
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
	q.remove(w)
	if q.named[w.digest] == w {
		delete(q.named, w.digest)
	}
	if w.unnamed {
		w.unnamed = false
		q.forgetUnclaimed()
	}
	if poll(w.wake) {
		q.wakeOne("")
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
	q := w.q
	if i := slices.IndexFunc(q.waiters, func(x *Waiter) bool { return x != w }); i >= 0 {
		signal(q.waiters[i].wake)
		q.waiters = slices.Delete(q.waiters, i, i+1)
	}
}

// LostRace records that w, woken by a release, found the lock taken (by another process, or by
// this client's own holder: the reply does not say whose).
func (r *Queues) LostRace(w *Waiter) {
	r.mu.Lock()
	w.q.lostAt = time.Now()
	r.mu.Unlock()
}

// remove takes w out of q, if it is there; the caller holds the queues' mutex.
func (q *waitQueue) remove(w *Waiter) {
	if i := slices.Index(q.waiters, w); i >= 0 {
		q.waiters = slices.Delete(q.waiters, i, i+1)
	}
}

// wakeOne wakes the waiter whose token digest is named, or the first one; the caller holds the
// queues' mutex.
func (q *waitQueue) wakeOne(digest string) {
	i := slices.IndexFunc(q.waiters, func(w *Waiter) bool { return digest == "" || w.digest == digest })
	if i < 0 {
		// Fair mode names the waiter whose turn it is; if it is not here, it is another process's
		// (or one of this Client's that does not know its digest yet: named).
		if digest != "" && q.named[digest] == nil {
			q.keepUnclaimed(digest)
		}
		return
	}
	signal(q.waiters[i].wake)
	q.waiters = slices.Delete(q.waiters, i, i+1)
}

// deliver handles a release message on ch (called by the subscriber).
func (r *Queues) deliver(ch, payload string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queues[ch]
	switch id, _, _ := strings.Cut(payload, "/"); {
	case q == nil:
		return
	case strings.HasPrefix(payload, grantPrefix):
		q.granted(payload)
		return
	case !strings.HasPrefix(payload, ClientIDPrefix):
		q.wakeOne(payload)
		return
	case r.copies != nil && !r.copies.count(ch, payload):
		return // not the quorum-th copy
	case id != r.id:
		q.foreignAt = time.Now()
	case time.Since(q.lostAt) < contestedFor && time.Since(q.foreignAt) < contestedFor:
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
		if !poll(q.ready) {
			close(q.ready)
		} else if reconnected {
			q.wakeOne("")
		}
	}
	r.mu.Unlock()
}

// missed wakes the first waiter of each of chs: their subscriptions broke or moved, and a release
// may have been missed (called by the subscriber).
func (r *Queues) missed(chs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range chs {
		if q := r.queues[ch]; q != nil {
			q.wakeOne("")
		}
	}
}

// sweep forgets the queues that had no waiters for idleAfter and stops subscribing their channels
// (under r.mu: a Join that makes the queue again wants the channel after that).
func (r *Queues) sweep(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch, q := range r.queues {
		if q.members == 0 && now.Sub(q.idleSince) >= idleAfter {
			delete(r.queues, ch)
			r.subs.want(ch, false)
		}
	}
	if r.copies != nil {
		r.copies.sweep(now)
	}
}

// Close wakes every waiter with ErrClosed and stops the subscriber.
func (r *Queues) Close() {
	r.once.Do(func() {
		r.mu.Lock()
		close(r.closed) // (under r.mu: no Join succeeds after it)
		r.mu.Unlock()
		r.subs.close()
	})
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

// granted hands a grant message to the waiter it names, if it is this Client's, and wakes it; the
// caller holds the queues' mutex.
func (q *waitQueue) granted(payload string) {
	digest, g := parseGrant(payload)
	switch w := q.named[digest]; {
	case !g.OK:
	case w == nil:
		q.keepUnclaimed(payload)
	default:
		w.grant = g
		q.remove(w)
		signal(w.wake)
	}
}

// Subscribed reports whether this Client has ch subscribed already (confirmed by the server).
func (r *Queues) Subscribed(ch string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queues[ch]
	return q != nil && poll(q.ready)
}

// TakeGrant returns and forgets the grant w received, if any; the wake-up that came with it is
// used up too (it must not pass to another waiter).
func (r *Queues) TakeGrant(w *Waiter) Grant {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := w.grant
	w.grant = Grant{}
	if g.OK {
		poll(w.wake)
	}
	return g
}

// poll receives from ch if it is ready, and reports whether it was.
func poll(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
