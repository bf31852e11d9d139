package store

import (
	"context"
	"sync"

	"github.com/lockkit/lockkit/core/internal/pipe"
)

// A Redlock acquisition returns once a quorum granted it, its requests to slower nodes maybe still
// on their way. A release that overtook one (on another connection) would release nothing there,
// and the late grant would keep the lock, held by nobody, until its TTL. So a success with
// requests still running is in flights until they returned, and a release of its hold sends to
// those nodes only after that (releaseAfter). A failed attempt gives back its late grants itself.

// flightKey names one hold: the lock's key, the owner's token and the hold's id.
type flightKey struct {
	key         string
	token, hold any
}

// flights are the Client's successful acquisitions whose requests to some nodes still run.
type flights struct {
	mu sync.Mutex
	m  map[flightKey]*rlAcquire
}

// set records that a's requests to some nodes are still running (on), or no longer.
func (f *flights) set(a *rlAcquire, on bool) {
	k := flightKey{key: a.r.Keys.Main, token: a.r.Token, hold: a.r.Hold}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case on:
		f.m[k] = a
	case f.m[k] == a:
		delete(f.m, k)
	}
}

// releaseAfter returns when a release of the hold may go to node i: at once if a, the hold's
// acquisition, is nil or answered on node i in time, else once its late requests returned (each
// bounded by the node timeout, unless go-redis ignores context deadlines) and node i's ran if left
// in the node's pipeline (WithPipelining). If ctx ends first, it returns ctx's error, and the
// grants of those requests are given back when they come instead of kept.
func (a *rlAcquire) releaseAfter(ctx context.Context, i int) error {
	if a == nil || a.got[i].err != errNodeTimeout { // (got is no longer written)
		return nil
	}

	a.smu.Lock()
	if a.flying && a.landed == nil {
		a.landed = make(chan struct{})
	}
	flying, landed := a.flying, a.landed
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
	pipe.Settle(ctx, a.own[i].err) // (node i's request returned: late ran after it)
	return nil
}

// inFlight returns the acquisition of the hold (k, token, hold) if it is in flights, or nil.
func (rl *Redlock) inFlight(k *Keys, token, hold any) *rlAcquire {
	rl.flights.mu.Lock()
	defer rl.flights.mu.Unlock()
	return rl.flights.m[flightKey{key: k.Main, token: token, hold: hold}]
}
