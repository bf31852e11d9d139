package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/middleware/httpmw"
	"github.com/redis/go-redis/v9"
)

// The workloads the ACLs of docs/security.md are checked with: each sends everything a feature
// sends to Redis, and returns the first thing that went wrong (a denied command fails it, or shows
// in ACL LOG). They synchronise on what the Client reports through a Hook, never on sleeps.

// aclProbe counts, per lock name, the failed acquire attempts (a waiter parked or queued) and the
// renewals a Client reports; a semaphore's are counted under "NAME permits".
type aclProbe struct {
	mu      sync.Mutex
	parked  map[string]int
	renewed map[string]int
}

func newACLProbe() *aclProbe { return &aclProbe{parked: map[string]int{}, renewed: map[string]int{}} }

func (p *aclProbe) hook() core.Option {
	return core.WithHook(core.Hook{
		Attempt: func(_ context.Context, w core.WaitInfo) {
			if !w.Acquired && w.Err == nil {
				p.mu.Lock()
				p.parked[aclProbeKey(w.Name, w.Limit)]++
				p.mu.Unlock()
			}
		},
		Renewed: func(_ context.Context, h core.HoldInfo) {
			p.mu.Lock()
			p.renewed[aclProbeKey(h.Lock.Name(), h.Lock.Limit())]++
			p.mu.Unlock()
		},
	})
}

func aclProbeKey(name string, limit int) string {
	if limit > 0 {
		return name + " permits"
	}
	return name
}

// await polls until the name has had at least parked failed attempts and renewed renewals, for at
// most 5 s.
func (p *aclProbe) await(name string, parked, renewed int) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		ok := p.parked[name] >= parked && p.renewed[name] >= renewed
		got := fmt.Sprintf("%d attempts failed, %d renewals", p.parked[name], p.renewed[name])
		p.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s after 5s, want %d and %d", name, got, parked, renewed)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// heldTTL is the TTL of the holds the workloads keep while a waiter waits and a renewal is awaited:
// short, so that the watchdog renews within a TTL/3 (0.5 s), yet long enough that a host starved by
// the tests beside it does not let the hold expire between two renewals (300 ms did once in CI:
// "permit extend: lock not held").
const heldTTL = 1500 * time.Millisecond

// acquireInBackground runs an acquire call in a goroutine; its result, released at once, comes on the
// channel.
func acquireInBackground(ctx context.Context, c *core.Client, name string, opts ...core.AcquireOption) <-chan error {
	done := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, name, time.Second, opts...)
		if err == nil {
			err = l.Release(context.Background())
		}
		done <- err
	}()
	return done
}

// lockWorkload is everything a service sends for locks: try, wait woken by a release, re-entry,
// renewals, Extend, TTL, fair mode (handoff, a waiter refreshing its place, one giving up), a
// guard with ReleaseSet, an httpmw idempotent request, an election (Campaign, Leader, Observe,
// Resign), replica acknowledgement and Close. With replica false there is no replica: WAIT answers
// 0 and the acquisition is refused (and undone), which still shows that WAIT was allowed.
func lockWorkload(ctx context.Context, rdb redis.UniversalClient, replica bool) error {
	p := newACLProbe()
	c, err := core.New(rdb, p.hook(), core.WithFairWaiterTimeout(300*time.Millisecond))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	l, err := c.Acquire(ctx, "acl", heldTTL)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if _, err := c.TryAcquire(ctx, "acl", time.Second); !errors.Is(err, core.ErrNotAcquired) {
		return fmt.Errorf("try: %v", err)
	}
	in, err := c.Acquire(l.Context(), "acl", time.Second)
	if err != nil {
		return fmt.Errorf("re-enter: %w", err)
	}
	if err := in.Release(ctx); err != nil {
		return fmt.Errorf("release inner: %w", err)
	}
	waited := acquireInBackground(ctx, c, "acl", core.WithWait(5*time.Second))
	if err := p.await("acl", 2, 1); err != nil { // a renewal while the waiter waits
		return err
	}
	x, err := c.Acquire(ctx, "extend", 10*time.Second)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if err := x.Extend(ctx, 20*time.Second); err != nil {
		return fmt.Errorf("extend: %w", err)
	}
	if _, err := x.TTL(ctx); err != nil {
		return fmt.Errorf("ttl: %w", err)
	}
	if err := x.Release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if err := manyWorkload(ctx, c, p); err != nil {
		return err
	}
	if l.Context().Err() != nil {
		return fmt.Errorf("lost: %v", context.Cause(l.Context()))
	}
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if err := <-waited; err != nil {
		return fmt.Errorf("waiter: %w", err)
	}
	if err := fairWorkload(ctx, c, p); err != nil {
		return err
	}
	g, err := c.Acquire(ctx, "job", time.Second, core.WithGuard("lockkit:done:{job}"))
	if err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	if err := g.ReleaseSet(ctx, "lockkit:done:{job}", []byte("ok"), time.Minute); err != nil {
		return fmt.Errorf("release set: %w", err)
	}
	if _, err := c.Acquire(ctx, "job", time.Second, core.WithGuard("lockkit:done:{job}")); !errors.Is(err, core.ErrGuarded) {
		return fmt.Errorf("guarded: %v", err)
	}
	if err := idempotentRequest(c); err != nil {
		return err
	}
	if err := electionWorkload(ctx, c, rdb); err != nil {
		return err
	}
	if err := ackedWorkload(ctx, rdb, replica); err != nil {
		return err
	}
	_, err = c.Acquire(ctx, "closed", time.Minute) // held when the client closes
	return err
}

// fairWorkload: a fair lock handed to a queued waiter that refreshed its place, and a fair waiter
// that gives up (the dequeue script).
func fairWorkload(ctx context.Context, c *core.Client, p *aclProbe) error {
	f, err := c.Acquire(ctx, "fair", time.Second, core.Fair())
	if err != nil {
		return fmt.Errorf("fair: %w", err)
	}
	fw := acquireInBackground(ctx, c, "fair", core.Fair(), core.WithWait(5*time.Second))
	if err := p.await("fair", 3, 0); err != nil { // queued, then refreshed its place twice
		return err
	}
	if err := f.Release(ctx); err != nil {
		return fmt.Errorf("fair release: %w", err)
	}
	if err := <-fw; err != nil {
		return fmt.Errorf("fair waiter: %w", err)
	}
	f2, err := c.Acquire(ctx, "fair", time.Second, core.Fair())
	if err != nil {
		return fmt.Errorf("fair again: %w", err)
	}
	if _, err := c.Acquire(ctx, "fair", time.Second, core.Fair(), core.WithWait(50*time.Millisecond)); !errors.Is(err, core.ErrNotAcquired) {
		return fmt.Errorf("fair timeout: %v", err)
	}
	if err := f2.Release(ctx); err != nil {
		return fmt.Errorf("fair release: %w", err)
	}
	return nil
}

// idempotentRequest sends one request through httpmw's Idempotency, twice: stored, then replayed.
func idempotentRequest(c *core.Client) error {
	runs := 0
	h := httpmw.Idempotency(c)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
	}))
	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", "acl-key")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			return fmt.Errorf("idempotent request: %d %s", rec.Code, rec.Body)
		}
	}
	if runs != 1 {
		return fmt.Errorf("idempotent request: handler ran %d times", runs)
	}
	return nil
}

// electionWorkload: an observer sees a leader campaign, Leader reads it, the leader resigns.
func electionWorkload(ctx context.Context, c *core.Client, rdb redis.UniversalClient) error {
	e, err := election.New(c, rdb, "acl")
	if err != nil {
		return err
	}
	octx, stop := context.WithCancel(ctx)
	obs := e.Observe(octx)
	defer func() {
		stop()
		for range obs { // until Observe has ended
		}
	}()
	term, err := e.Campaign(ctx, "leader-1")
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	timeout := time.After(5 * time.Second)
	for seen := false; !seen; {
		select {
		case ld := <-obs:
			seen = ld.Fence == term.Fence()
		case <-timeout:
			return errors.New("observe: the term not seen in 5s")
		}
	}
	if ld, err := e.Leader(ctx); err != nil || ld.Value != "leader-1" {
		return fmt.Errorf("leader: %+v %v", ld, err)
	}
	return term.Resign(ctx)
}

// ackedWorkload takes a lock, renews and extends it, and releases it writing a guarded value, with
// WithReplicaAck.
func ackedWorkload(ctx context.Context, rdb redis.UniversalClient, replica bool) error {
	p := newACLProbe()
	// Generous: a loaded host (or a replica just in sync) acknowledges late; the TTL is longer than
	// the acknowledgement may take, so that a late one is not refused as outliving the lock.
	acked, err := core.New(rdb, p.hook(), core.WithReplicaAck(1, 2*time.Second))
	if err != nil {
		return err
	}
	defer acked.Close(context.Background())
	a, err := acked.Acquire(ctx, "acked", 4*time.Second, core.WithGuard("lockkit:done:{acked}"))
	if !replica {
		if err == nil || !strings.Contains(err.Error(), "replicas acknowledged") {
			return fmt.Errorf("replica ack without a replica: %v", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("replica ack: %w", err)
	}
	if err := p.await("acked", 0, 1); err != nil {
		return err
	}
	if err := a.Extend(ctx, time.Second); err != nil {
		return fmt.Errorf("replica ack: extend: %w", err)
	}
	return a.ReleaseSet(ctx, "lockkit:done:{acked}", []byte("ok"), time.Minute)
}

// aclWorkload is lockWorkload without a replica.
func aclWorkload(ctx context.Context, rdb redis.UniversalClient) error {
	return lockWorkload(ctx, rdb, false)
}

// permitsWorkload is everything a service sends for semaphores (core.Permits): a permit renewed,
// extended and read (TTL) while a waiter waits, handed to that waiter on release; fair permits with
// a waiter that gives up and one handed a permit; a release after the permit was taken away
// (answered from Redis: "not held"); a permit held at Close. admin takes the permit away.
func permitsWorkload(ctx context.Context, rdb, admin redis.UniversalClient) error {
	p := newACLProbe()
	c, err := core.New(rdb, p.hook(), core.WithFairWaiterTimeout(300*time.Millisecond))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	one := core.Permits(1)
	h, err := c.Acquire(ctx, "pool", heldTTL, one)
	if err != nil {
		return fmt.Errorf("permit: %w", err)
	}
	w := acquireInBackground(ctx, c, "pool", one, core.WithWait(5*time.Second))
	if err := p.await("pool permits", 3, 1); err != nil { // queued and refreshed; a renewal
		return err
	}
	if err := h.Extend(ctx, time.Second); err != nil {
		return fmt.Errorf("permit extend: %w", err)
	}
	if _, err := h.TTL(ctx); err != nil {
		return fmt.Errorf("permit ttl: %w", err)
	}
	if err := h.Release(ctx); err != nil {
		return fmt.Errorf("permit release: %w", err)
	}
	if err := <-w; err != nil {
		return fmt.Errorf("permit waiter: %w", err)
	}
	fair := []core.AcquireOption{one, core.Fair()}
	f, err := c.Acquire(ctx, "fpool", time.Second, fair...)
	if err != nil {
		return fmt.Errorf("fair permit: %w", err)
	}
	if _, err := c.Acquire(ctx, "fpool", time.Second, append(fair, core.WithWait(50*time.Millisecond))...); !errors.Is(err, core.ErrNotAcquired) {
		return fmt.Errorf("fair permit timeout: %v", err)
	}
	fw := acquireInBackground(ctx, c, "fpool", append(fair, core.WithWait(5*time.Second))...)
	if err := p.await("fpool permits", 2, 0); err != nil {
		return err
	}
	if err := f.Release(ctx); err != nil {
		return fmt.Errorf("fair permit release: %w", err)
	}
	if err := <-fw; err != nil {
		return fmt.Errorf("fair permit waiter: %w", err)
	}
	// A read-write lock runs the semaphore's scripts: a read handed on to a queued writer.
	r, err := c.Acquire(ctx, "doc", time.Second, core.Read())
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	rw := acquireInBackground(ctx, c, "doc", core.Write(), core.WithWait(5*time.Second))
	if err := p.await("doc", 2, 0); err != nil { // queued and refreshed
		return err
	}
	if err := r.Release(ctx); err != nil {
		return fmt.Errorf("read release: %w", err)
	}
	if err := <-rw; err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	gone, err := c.Acquire(ctx, "gone", 10*time.Second, one)
	if err != nil {
		return fmt.Errorf("permit: %w", err)
	}
	if err := forceRelease(ctx, admin, "gone"); err != nil {
		return err
	}
	if err := gone.Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		return fmt.Errorf("release of a permit taken away: %v", err)
	}
	_, err = c.Acquire(ctx, "closed", time.Minute, one) // held when the client closes
	return err
}

// forceRelease force-releases name with full privileges (admin).
func forceRelease(ctx context.Context, admin redis.UniversalClient, name string) error {
	c, err := core.New(admin)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if _, err := c.ForceRelease(ctx, name); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// inspectWorkload inspects a name whose lock is held with a fair waiter queued (that refreshed its
// place) and a permit waiter queued, a name held by permits, and a name nothing holds. admin
// sets the name up.
func inspectWorkload(ctx context.Context, rdb, admin redis.UniversalClient) error {
	c, err := core.New(rdb)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	b, err := busyName(ctx, admin, "insp")
	if err != nil {
		return err
	}
	defer b.stop()
	info, err := c.Inspect(ctx, "insp")
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if !info.Held || info.Mode != "lock" || info.Queued != 1 || len(info.Permits) != 0 || info.PermitsQueued != 1 {
		return fmt.Errorf("inspect: %+v", info)
	}
	// A name held by permits: Inspect reads their leases (and their holders' labels).
	p, err := b.c.Acquire(ctx, "insp-permits", 10*time.Second, core.Permits(2))
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	defer p.Release(context.Background())
	if info, err := c.Inspect(ctx, "insp-permits"); err != nil || !info.Held || info.Mode != "permit" || len(info.Permits) != 1 {
		return fmt.Errorf("inspect permits: %+v %v", info, err)
	}
	if info, err := c.Inspect(ctx, "nothing"); err != nil || info.Held {
		return fmt.Errorf("inspect a free name: %+v %v", info, err)
	}
	return nil
}

// forceReleaseWorkload force-releases a name whose lock is held with a fair waiter and a permit
// waiter queued, each queue with a dead waiter at its head (a process that died while queued); both
// live waiters must then get what they wait for.
func forceReleaseWorkload(ctx context.Context, rdb, admin redis.UniversalClient) error {
	c, err := core.New(rdb)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	b, err := busyName(ctx, admin, "fr")
	if err != nil {
		return err
	}
	defer b.stop()
	if err := deadWaiters(ctx, admin, "fr"); err != nil {
		return err
	}
	ok, err := c.ForceRelease(ctx, "fr")
	if err != nil || !ok {
		return fmt.Errorf("force release: %v %v", ok, err)
	}
	return b.outcomes()
}

// busy is a name whose lock is held with a fair waiter queued and a permit waiter queued behind it
// (one name, one lock: the permit waits for the lock), set up with full privileges.
type busy struct {
	c            *core.Client
	cancel       context.CancelFunc
	fair, permit <-chan error // the waiters' outcomes
}

// busyName sets name up as busy describes, over admin, and returns when both waiters are queued
// (the fair one has refreshed its place).
func busyName(ctx context.Context, admin redis.UniversalClient, name string) (*busy, error) {
	p := newACLProbe()
	c, err := core.New(admin, p.hook(), core.WithFairWaiterTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	b := &busy{c: c, cancel: cancel}
	if _, err := c.Acquire(ctx, name, 10*time.Second, core.Fair()); err != nil {
		b.stop()
		return nil, fmt.Errorf("setup: %w", err)
	}
	b.fair = acquireInBackground(wctx, c, name, core.Fair(), core.WithWait(10*time.Second))
	b.permit = acquireInBackground(wctx, c, name, core.Permits(1), core.WithWait(10*time.Second))
	if err := p.await(name, 2, 0); err != nil {
		b.stop()
		return nil, err
	}
	if err := p.await(name+" permits", 1, 0); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

// outcomes waits for both waiters and returns the first error.
func (b *busy) outcomes() error {
	fair, permit := <-b.fair, <-b.permit
	b.fair, b.permit = nil, nil
	if fair != nil {
		return fmt.Errorf("fair waiter: %w", fair)
	}
	if permit != nil {
		return fmt.Errorf("permit waiter: %w", permit)
	}
	return nil
}

// stop ends the waiters and closes the client, which releases what it holds.
func (b *busy) stop() {
	b.cancel()
	if b.fair != nil && b.permit != nil {
		_ = b.outcomes()
	}
	_ = b.c.Close(context.Background())
}

// deadWaiters puts a dead waiter at the head of the name's fair queue (one that refreshed its
// place, a minute ago) and of its semaphore's queue, as docs/keys.md describes them: what a
// process that died while queued leaves behind.
func deadWaiters(ctx context.Context, admin redis.UniversalClient, name string) error {
	key := locktest.Key(name)
	ago := time.Now().Add(-time.Minute)
	member := "1000\x00100\x00" + strings.Repeat("d", 32) + "\x00h\x00dead"
	_, err := admin.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, key+":queue", redis.Z{Score: float64(2*ago.UnixMicro() + 1), Member: member})
		p.HSet(ctx, key+":queue:deadlines", member, ago.UnixMilli())
		pm := "1000\x00100\x00" + strings.Repeat("e", 32) + "\x001\x00dead" // a permit waiter: X is its limit
		p.ZAdd(ctx, key+":permits:queue", redis.Z{Score: float64(2*ago.UnixMicro() + 1), Member: pm})
		p.HSet(ctx, key+":permits:queue:deadlines", pm, ago.UnixMilli())
		return nil
	})
	return err
}
