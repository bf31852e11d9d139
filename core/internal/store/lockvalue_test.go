package store

import (
	"context"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// lockRig runs the lock scripts directly against a real redis-server, so that a test can send
// what go-redis sends when it replays a call whose reply was lost.
type lockRig struct {
	t   *testing.T
	rdb *redis.Client
	n   *Node
	k   Keys
}

func newLockRig(t *testing.T) *lockRig {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	r := &lockRig{t: t, rdb: rdb, n: NewNode(rdb, "c:test", &Config{})}
	r.k.Init("lockkit:", "chain")
	return r
}

// semKeys are the keys of the semaphore of the rig's name.
func (r *lockRig) semKeys() *Keys {
	var p Keys
	p.InitSem("lockkit:", "chain", 0)
	return &p
}

// take acquires the lock for token and returns its fence.
func (r *lockRig) take(token string) int64 {
	r.t.Helper()
	res, err := r.n.Acquire(context.Background(), &AcquireReq{Keys: &r.k, Token: token, Hold: "0", TTL: time.Second})
	if err != nil || !res.OK {
		r.t.Fatalf("acquire %s: %+v %v", token, res, err)
	}
	return res.Fence
}

// release sends the release script of token's acquisition with that fence; what a replay sends.
func (r *lockRig) release(token string, fence int64) int64 {
	r.t.Helper()
	k := r.k
	k.Held(fence)
	res, err := r.n.Release(context.Background(), ReleaseReq{Keys: &k, Token: token, Hold: "0", LockTTL: time.Second})
	n := res.Left
	if err != nil {
		r.t.Fatalf("release %s: %v", token, err)
	}
	return n
}

// A replayed release answers "released" whatever acquisitions of the lock came after it, even if a
// later holder's lock expired; a release whose acquisition ForceRelease took answers -1, even after
// others took the lock again.
func TestLockValue_releaseChain(t *testing.T) {
	r := newLockRig(t)
	ctx := context.Background()
	fa := r.take("a")
	if n := r.release("a", fa); n != 0 {
		t.Fatalf("release: %d", n)
	}
	for i := range 20 { // the replay comes late: 20 more acquisitions came and went
		tok := string(rune('b' + i%20))
		if n := r.release(tok, r.take(tok)); n != 0 {
			t.Fatalf("release %s: %d", tok, n)
		}
	}
	if n := r.release("a", fa); n != 0 {
		t.Fatalf("replayed release after 20 other acquisitions: %d, want 0 (released)", n)
	}
	fx := r.take("x")
	if n := r.release("a", fa); n != 0 {
		t.Fatalf("replayed release while another holds the lock: %d, want 0", n)
	}
	if n := r.release("x", fx); n != 0 {
		t.Fatal("x's release failed")
	}
	// Another holder's lock expires (the key goes) after a's release: a's replay, coming within
	// go-redis' retry window, is still recognized.
	fy := r.take("y")
	r.rdb.Del(ctx, r.k.Main) // y's lock expired
	fv := r.take("v")
	if n := r.release("a", fa); n != 0 {
		t.Fatalf("replayed release after a later lock expired: %d, want 0", n)
	}
	if n := r.release("v", fv); n != 0 {
		t.Fatal("v's release failed")
	}
	_ = fy
	// ForceRelease breaks the chain the same way.
	fz := r.take("z")
	if ok, err := r.n.ForceRelease(ctx, NameReq{Lock: &r.k, Sem: r.semKeys(), Msg: "c:force/x"}); err != nil || !ok {
		t.Fatalf("force release: %v %v", ok, err)
	}
	if n := r.release("z", fz); n != -1 {
		t.Fatalf("release after ForceRelease: %d, want -1", n)
	}
	fw := r.take("w")
	if fw <= fz {
		t.Fatalf("fence after ForceRelease %d, not above %d", fw, fz)
	}
	if n := r.release("z", fz); n != -1 {
		t.Fatalf("release after ForceRelease and a new holder: %d, want -1", n)
	}
	if n := r.release("w", fw); n != 0 {
		t.Fatal("w's release failed")
	}
	// A free lock keeps its fence for a while, then goes.
	if d := r.rdb.PTTL(ctx, r.k.Main).Val(); d <= 0 || d > 10*time.Second {
		t.Fatalf("free lock PTTL %v, want (0, 10s]", d)
	}
}
