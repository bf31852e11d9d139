package wait

import "strings"

// Release messages name a fair or permit waiter by the SHA-1 of its token (docs/keys.md), which the
// scripts compute. The client computes none (FIPS 140-only mode, see script.Sender): a waiting call
// asks the server for its token's digest before it first parks (one round trip per waiting call),
// and its waiter joins the local queue unnamed until then. A grant or a turn that names a digest no
// waiter has, while some are unnamed, is kept (at most maxUnclaimed per queue) and handed to the
// waiter it names when that one learns its digest, so that none is lost to the race.

// maxUnclaimed bounds the messages a queue keeps for its unnamed waiters.
const maxUnclaimed = 64

// Named gives w, which joined unnamed, its digest, and hands it the messages kept for it.
func (r *Queues) Named(w *Waiter, digest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !w.unnamed {
		return
	}
	q := w.q
	w.unnamed, w.digest = false, digest
	q.named[digest] = w
	kept := q.unclaimed
	q.unclaimed = nil
	q.forgetUnclaimed()
	for _, m := range kept { // handed to w, or kept again for the others
		if strings.HasPrefix(m, grantPrefix) {
			q.granted(m)
		} else {
			q.wakeOne(m)
		}
	}
}

// keepUnclaimed keeps message m (a grant, or a fair turn's digest) that names no waiter of q, if
// some of q's waiters are unnamed; the caller holds the queues' mutex.
func (q *waitQueue) keepUnclaimed(m string) {
	if q.unnamed == 0 {
		return
	}
	if len(q.unclaimed) == maxUnclaimed {
		q.unclaimed = append(q.unclaimed[:0], q.unclaimed[1:]...)
	}
	q.unclaimed = append(q.unclaimed, m)
}

// forgetUnclaimed counts an unnamed waiter out (named, or gone), and forgets the kept messages when
// none is left; the caller holds the queues' mutex.
func (q *waitQueue) forgetUnclaimed() {
	q.unnamed--
	if q.unnamed == 0 {
		q.unclaimed = nil
	}
}
