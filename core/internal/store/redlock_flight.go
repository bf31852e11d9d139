package store

import (
	"context"
	"sync"

	"github.com/lockkit/lockkit/core/internal/pipe"
)

// A Redlock acquisition returns once a quorum granted it; its requests to the slower nodes may
// still be on their way. A release of that hold must not reach such a node before the node ran
// the acquisition's request (on another connection, it could): the node would find nothing to
// release, then grant the late request and keep the lock, held by nobody, until its TTL. So a
// successful acquisition with requests still running is recorded in flights until they all
// returned, and a release of its hold sends to those nodes only after that (releaseAfter). An
// attempt that failed gives back its late grants itself, after their requests (settleLate).

// flightKey names one hold: the lock's key, the owner's token and the hold's id.
type flightKey struct {
	key         string
	token, hold any
}

// flights are the Client's successful acquisitions whose requests to some nodes are still
// running.
type flights struct {
	mu sync.Mutex
	m  map[flightKey]*rlAcquire
}

func (f *flights) add(k flightKey, a *rlAcquire) {
	f.mu.Lock()
	if f.m == nil {
		f.m = make(map[flightKey]*rlAcquire)
	}
	f.m[k] = a
	f.mu.Unlock()
}

func (f *flights) remove(k flightKey, a *rlAcquire) {
	f.mu.Lock()
	if f.m[k] == a {
		delete(f.m, k)
	}
	f.mu.Unlock()
}

// of returns the acquisition of the hold k whose requests are still running, or nil.
func (f *flights) of(k flightKey) *rlAcquire {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[k]
}

// key names the hold a takes.
func (a *rlAcquire) key() flightKey {
	return flightKey{key: a.k.Main, token: a.r.Token, hold: a.r.Hold}
}

// land records that one of the requests still running when the attempt stopped waiting returned;
// the caller holds a.smu, and a.decided is set. After the last one, releases wait no more.
func (a *rlAcquire) land() {
	if !a.flying {
		return
	}
	if a.out--; a.out > 0 {
		return
	}
	a.flying = false
	a.rl.flights.remove(a.key(), a)
	if a.landed != nil {
		close(a.landed)
	}
}

// fly records, once the attempt succeeded, that out of its requests are still running (the
// caller holds a.smu); a release of its hold then waits for them (releaseAfter).
func (a *rlAcquire) fly(out int) {
	a.out = out
	if out > 0 {
		a.flying = true
		a.rl.flights.add(a.key(), a)
	}
}

// releaseAfter returns when a release of the hold may go to node i: at once if the acquisition
// of the hold answered on node i in time, else once its requests that were still running when it
// returned have returned (each is bounded by the node timeout, unless the go-redis client ignores
// context deadlines), and node i's has run if it was left running in the node's pipeline
// (WithPipelining). If ctx ends first, it returns ctx's error, and the grants those requests bring
// are given back when they come instead of kept.
func (a *rlAcquire) releaseAfter(ctx context.Context, i int) error {
	if a.answered[i] { // (not written once the attempt stopped waiting)
		return nil
	}
	a.smu.Lock()
	flying := a.flying
	if flying && a.landed == nil {
		a.landed = make(chan struct{})
	}
	landed := a.landed
	a.smu.Unlock()
	if flying {
		select {
		case <-landed:
		case <-ctx.Done():
			a.smu.Lock()
			a.dropLate = a.flying
			a.smu.Unlock()
			return ctx.Err()
		}
	}
	pipe.Settle(ctx, a.own[i].err) // (node i's request returned: land ran after it)
	return nil
}

// inFlight returns the acquisition of the hold (k, token, hold) if its requests to some nodes are
// still running, or nil.
func (rl *Redlock) inFlight(k *Keys, token, hold any) *rlAcquire {
	return rl.flights.of(flightKey{key: k.Main, token: token, hold: hold})
}
