package core

import (
	"context"
	"errors"
	"time"

	"github.com/lockkit/lockkit/core/internal/store"
	"github.com/lockkit/lockkit/core/internal/wait"
)

// LockInfo is what Inspect reads about a name: who holds it and in which mode (a lock, a write,
// reads or permits: one name is one lock, whose kinds of hold exclude each other as
// docs/guarantees.md says), with every holder's fence and lease, and who waits.
type LockInfo struct {
	// Name is the lock name and Key its Redis key.
	Name, Key string
	// Held reports whether anything holds the name: a lock, a write, reads or permits.
	Held bool
	// Mode is the mode of the name's current holders: "lock" (an exclusive hold taken with
	// neither Read, Write nor Permits, fair or not), "write", "read", "permit", or "" when free.
	Mode string
	// Holders lists every live holder of the name, whatever its mode, each with its Mode, Fence
	// and TTL: the lock's owner, the writer, the readers or the permits' holders (the earliest
	// lease expiry first). Permits, Readers and Writer list the same holders by kind.
	Holders []HolderInfo
	// TTL is how long the name stays held if nobody renews: the lock's remaining TTL, or the
	// longest remaining lease of its writer, readers or permits; zero when it is free.
	TTL time.Duration
	// Fence is the fencing token of the current acquisition (with readers or permits, the newest
	// holder's); when the name is free, the last one issued by any kind of hold of the name (a
	// free name keeps it 10 s after its last release), else zero. A name has one sequence of
	// fences across every kind of hold.
	Fence int64
	// Queued is the number of live waiters in the Redis-side queue of fair mode (Fair). Waiters
	// that are not fair wait in their own processes and are not counted.
	Queued int
	// Permits lists the live permits of the name's semaphore, the earliest lease expiry first,
	// each with its own Fence and TTL (what remains of its lease); Holds is always 1.
	Permits []HolderInfo
	// Limit is the semaphore's limit while permits are held: the lowest limit their holders passed
	// (no more permits than that are granted); 0 when none is held.
	Limit int
	// PermitsQueued is the number of live waiters queued in Redis for a permit (every permit
	// waiter queues there, fair or not; see Permits).
	PermitsQueued int
	// Readers lists the live read holds of the name's read-write lock (Read), the earliest lease
	// expiry first, and Writer its write hold (Write), nil when none; each with its own Fence and
	// TTL, Holds 1 (nested holds send nothing to Redis). RWQueued is the number of live readers
	// and writers queued for it.
	Readers  []HolderInfo
	Writer   *HolderInfo
	RWQueued int
}

// HolderInfo describes one holder of a lock or of a semaphore's permit: the kind of its hold
// (Mode), a digest of its owner's token (Digest), its hold count, fence and remaining TTL, when it
// was acquired (by the Redis server's clock) and the holder's host, pid and label. Its fields are
// documented where it is declared.
type HolderInfo = store.Holder

// Inspect reads what Redis holds about the named lock: whether it is held, by whom (a digest of
// the owner token, the hold count, since when, the holder's host, pid and label), its remaining
// TTL, its fence and how many fair waiters are queued; and the same about each permit of the
// semaphore of that name (Permits), with the semaphore's limit, and each reader and the writer of
// the read-write lock of that name (Read, Write). It only reads (one script flagged no-writes, sent
// with EVALSHA_RO, so that a user with read-only access to the keys may call it; see
// docs/security.md): no TTL is extended, no waiter woken. A client that routes read-only commands
// to replicas (ClusterOptions.ReadOnly) may get a replica's answer, which can lag.
//
// On Redlock it answers the quorum's view: the lock is held when a quorum of nodes has the same
// holder; TTL is the shortest among those nodes and Fence the one a quorum of them records (the
// holder's); a free lock's Fence is the largest counter of the nodes that answered.
// It fails with ErrUnavailable when fewer than a quorum answer.
//
// name is the lock's full name, as Lock.Name returns it: a lock taken with InNamespace(ns) is
// named Namespaced(ns, name), e.g. "@cron/report" for cronlock's job "report".
func (c *Client) Inspect(ctx context.Context, name string) (LockInfo, error) {
	if err := validFullName(name); err != nil {
		return LockInfo{}, err
	}
	var k, p store.Keys
	k.Init(c.opt.prefix, name)
	p.InitSem(c.opt.prefix, name, 0)
	si, err := c.st.Inspect(ctx, store.NameReq{Lock: &k, Sem: &p})
	if err = fromStore(err); err != nil && !errors.Is(err, ErrUnavailable) {
		err = unavailable("inspect", err)
	}
	return LockInfo{Name: name, Key: k.Main, Held: si.Held, Mode: si.Mode, Holders: si.Holders, TTL: si.TTL,
		Fence: si.Fence, Queued: si.Queued, Permits: si.Permits, Limit: si.Limit, PermitsQueued: si.PermitsQueued,
		Readers: si.Readers, Writer: si.Writer, RWQueued: si.RWQueued}, err
}

// ForceRelease is an operator's action: it deletes the named lock whoever holds it, every permit of
// the semaphore of that name (Permits) and every read and write hold of the read-write lock of that
// name (Read, Write), and wakes waiters as releases do: the lock's next waiter (the head of the fair
// queue in fair mode) and one permit (or read-write) waiter per freed hold. It reports whether
// there was a hold to delete.
//
// The holders are not told at once: each one's next renewal (within a third of its TTL by default)
// finds its hold gone, and its context is cancelled with a *LostError whose Reason is "not_owner";
// its Release then returns an error matching ErrNotHeld. Until then it may still work under a lock
// somebody else can take: use it on a holder that is stuck, or one whose work is fenced (Lock.Fence
// keeps increasing, so a fenced resource rejects the old holder's writes). On Redlock every node's
// copy is deleted. name is the full name, as for Inspect.
func (c *Client) ForceRelease(ctx context.Context, name string) (bool, error) {
	if err := validFullName(name); err != nil {
		return false, err
	}
	var k, p store.Keys
	k.Init(c.opt.prefix, name)
	p.InitSem(c.opt.prefix, name, 0)
	ok, err := c.st.ForceRelease(ctx, store.NameReq{Lock: &k, Sem: &p, Msg: wait.ClientIDPrefix + "force/" + store.NewToken()[:12]})
	if err = fromStore(err); err != nil && !errors.Is(err, ErrUnavailable) {
		err = unavailable("force release", err)
	}
	return ok, err
}

// validFullName checks a name given to Inspect or ForceRelease (store.FullNameProblem).
func validFullName(name string) error {
	if p := store.FullNameProblem(name); p != "" {
		return invalid("%s", p)
	}
	return nil
}
