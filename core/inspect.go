package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"github.com/lockkit/lockkit/core/internal/wait"
	"os"
	"strconv"
	"strings"
	"time"
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

// HolderInfo describes one holder of a lock or of a semaphore's permit.
type HolderInfo struct {
	// Mode is the kind of this hold: "lock", "write", "read" or "permit" (see LockInfo.Mode).
	Mode string
	// Digest identifies the owner without revealing its token (which would let anybody release
	// the lock): the first 12 hex digits of the SHA-256 of the token. A holder can log the same
	// digest of its Lock.Token to be found by it.
	Digest string
	// Holds is the owner's hold count (more than 1 when re-entered).
	Holds int64
	// Fence and TTL are the holder's fencing token and remaining time to live (for a lock, the
	// same as LockInfo's).
	Fence int64
	TTL   time.Duration
	// Acquired is when the owner took the lock, by the Redis server's clock, and HeldFor how long
	// ago that was, by the same clock. Zero when unknown (taken by an older lockkit version).
	Acquired time.Time
	HeldFor  time.Duration
	// Host and PID name the holder's process; Label is its Client's WithLabel.
	Host  string
	PID   int
	Label string
}

// holderLabel is the label the acquire scripts record: "host pid label".
func holderLabel(label string) string {
	host, err := os.Hostname()
	if err != nil || host == "" || strings.ContainsAny(host, " \x00") {
		host = "unknown"
	}
	return host + " " + strconv.Itoa(os.Getpid()) + " " + strings.ReplaceAll(label, "\x00", "?")
}

// digest returns the digest of an owner token as HolderInfo reports it.
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:6])
}

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
	var k, p keys
	k.init(c.opt.prefix, name)
	p.initSem(c.opt.prefix, name, 0)
	info, err := c.st.inspect(ctx, &k, &p)
	if err != nil && !errors.Is(err, ErrUnavailable) {
		err = unavailable("inspect", err)
	}
	info.Name, info.Key = name, k.main
	return info, err
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
	var k, p keys
	k.init(c.opt.prefix, name)
	p.initSem(c.opt.prefix, name, 0)
	ok, err := c.st.forceRelease(ctx, &k, &p, wait.ClientIDPrefix+"force/"+newToken()[:12])
	if err != nil && !errors.Is(err, ErrUnavailable) {
		err = unavailable("force release", err)
	}
	return ok, err
}

// validFullName checks a name given to Inspect or ForceRelease: a name Acquire takes, or the full
// name of a lock in a namespace ("@ns/name", see Namespaced).
func validFullName(name string) error {
	if name == "" || name[0] != '@' {
		return validate(name, minTTL)
	}
	ns, rest, _ := strings.Cut(name[1:], "/")
	if !validNamespace(ns) || rest == "" || len(rest) > maxNameLen {
		return invalid("a lock name starting with '@' must be a namespaced name, @NAMESPACE/NAME (see Namespaced)")
	}
	return nil
}

var errInspectReply = errors.New("unexpected inspect reply")

// parseInspect reads inspect.lua's reply.
func parseInspect(v []any) (LockInfo, error) {
	var info LockInfo
	if len(v) != 8 {
		return info, errInspectReply
	}
	val, _ := v[0].(string)
	pttl, _ := v[1].(int64)
	queued, _ := v[2].(int64)
	nowMS, _ := v[3].(int64)
	permits, _ := v[4].([]any)
	pqueued, _ := v[5].(int64)
	rw, _ := v[6].([]any)
	rwQueued, _ := v[7].(int64)
	info.Queued, info.PermitsQueued, info.RWQueued = int(queued), int(pqueued), int(rwQueued)
	if val != "" {
		lv, ok := parseLockValue(val)
		if !ok {
			return info, errInspectReply
		}
		info.Fence = lv.fence
		if lv.token != "" && !isMark(lv.token) {
			info.Held = true
			if pttl > 0 {
				info.TTL = time.Duration(pttl) * time.Millisecond
			}
			h := HolderInfo{Mode: "lock", Digest: digest(lv.token), Holds: int64(len(splitHolds(lv.holds))), Fence: lv.fence, TTL: info.TTL}
			at, _ := parseAcquired(lv.acquired)
			parseHolder(&h, strconv.FormatInt(at.UnixMilli(), 10)+" "+lv.label, nowMS)
			info.Holders = append(info.Holders, h)
		}
	}
	parseLeases(permits, nowMS, func(h HolderInfo, limit int) {
		if limit > 0 && (info.Limit == 0 || limit < info.Limit) {
			info.Limit = limit
		}
		h.Mode = "permit"
		info.Permits = append(info.Permits, h)
		info.Holders = append(info.Holders, h)
	})
	parseLeases(rw, nowMS, func(h HolderInfo, limit int) {
		if limit == 1 {
			h.Mode = "write"
			info.Writer = &h
		} else {
			h.Mode = "read"
			info.Readers = append(info.Readers, h)
		}
		info.Holders = append(info.Holders, h)
	})
	if len(info.Holders) > 0 {
		info.Held, info.Mode = true, info.Holders[0].Mode
		if info.TTL == 0 {
			for _, h := range info.Holders {
				info.TTL = max(info.TTL, h.TTL)
			}
		}
		if info.Mode != "lock" {
			info.Fence = 0
			for _, h := range info.Holders {
				info.Fence = max(info.Fence, h.Fence)
			}
		}
	}
	return info, nil
}

// parseLeases reads the leases inspect.lua lists (token, expiry, limit, fence, label each) and
// passes each holder and its limit to add.
func parseLeases(list []any, nowMS int64, add func(h HolderInfo, limit int)) {
	for i := 0; i+4 < len(list); i += 5 {
		tok, _ := list[i].(string)
		expiry, _ := list[i+1].(string)
		limit, _ := list[i+2].(string)
		fence, _ := list[i+3].(string)
		label, _ := list[i+4].(string)
		h := HolderInfo{Digest: digest(tok), Holds: 1}
		h.Fence, _ = strconv.ParseInt(fence, 10, 64)
		if at, err := strconv.ParseInt(expiry, 10, 64); err == nil {
			h.TTL = time.Duration(at-nowMS) * time.Millisecond
		}
		n, _ := strconv.Atoi(limit)
		parseHolder(&h, label, nowMS)
		add(h, n)
	}
}

// isMark reports whether a lock value's token is a family's mark (lock.lua): permits or read-write
// holds have the name, and the lock key only keeps its fence.
func isMark(token string) bool { return token[0] == 1 }

// lockValue is a lock's value in Redis (see internal/script/lua/lock.lua): NUL-separated fields.
type lockValue struct {
	token, acquired, holds, label string
	fence                         int64
}

// parseLockValue reads a lock's value: TOKEN FENCE HOLDS W RELEASED ACQUIRED LABEL [EXTRA] when
// held, "" FENCE RELEASED when free.
func parseLockValue(v string) (lockValue, bool) {
	f := strings.SplitN(v, "\x00", 8)
	if (f[0] == "" && len(f) != 3) || (f[0] != "" && len(f) < 7) {
		return lockValue{}, false
	}
	fence, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return lockValue{}, false
	}
	lv := lockValue{token: f[0], fence: fence}
	if lv.token != "" {
		lv.holds, lv.acquired, lv.label = f[2], f[5], f[6]
	}
	return lv, true
}

// parseAcquired reads a lock's ACQUIRED field: "SECONDS.MICROSECONDS" (the server's clock), or
// milliseconds (Redlock, the client's clock).
func parseAcquired(s string) (time.Time, bool) {
	sec, us, dot := strings.Cut(s, ".")
	a, err1 := strconv.ParseInt(sec, 10, 64)
	if !dot {
		return time.UnixMilli(a), err1 == nil
	}
	b, err2 := strconv.ParseInt(us, 10, 64)
	return time.Unix(a, b*1000), err1 == nil && err2 == nil
}

// splitHolds returns the hold ids of a lock's value.
func splitHolds(holds string) []string { return strings.Fields(holds) }

// parseHolder fills h from the label an acquisition recorded, "acquired-ms host pid label" (empty
// when taken by an older lockkit version).
func parseHolder(h *HolderInfo, m string, nowMS int64) {
	if m == "" {
		return
	}
	parts := strings.SplitN(m, " ", 4)
	if at, err := strconv.ParseInt(parts[0], 10, 64); err == nil {
		h.Acquired = time.UnixMilli(at)
		h.HeldFor = time.Duration(nowMS-at) * time.Millisecond
	}
	if len(parts) == 4 {
		h.Host, h.Label = parts[1], parts[3]
		h.PID, _ = strconv.Atoi(parts[2])
	}
}
