package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// renewRig holds locks of its own on a real redis-server, for renewal rounds through a fenced Node
// (what core.New makes).
type renewRig struct {
	t   *testing.T
	srv *redistest.Server
	rdb *redis.Client
	n   *Node
}

func newRenewRig(t *testing.T) *renewRig {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	n := NewNode(rdb, "c:test", &Config{})
	n.Fenced = true
	return &renewRig{t: t, srv: srv, rdb: rdb, n: n}
}

// take acquires name for token with ttl and returns the keys of that acquisition.
func (r *renewRig) take(name, token string, ttl time.Duration) *Keys {
	r.t.Helper()
	k := &Keys{}
	k.Init("lockkit:", name)
	res, err := r.n.Acquire(context.Background(), &AcquireReq{Keys: k, Token: token, Hold: "0", TTL: ttl})
	if err != nil || !res.OK {
		r.t.Fatalf("acquire %s for %s: %+v %v", name, token, res, err)
	}
	k.Held(res.Fence)
	return k
}

// pttl is the key's remaining TTL.
func (r *renewRig) pttl(k *Keys) time.Duration {
	r.t.Helper()
	return r.rdb.PTTL(context.Background(), k.Main).Val()
}

// renew sends one renewal round of items.
func (r *renewRig) renew(items []RenewItem) error {
	r.t.Helper()
	for i := range items {
		items[i].OK, items[i].Err = false, nil
	}
	return r.n.Renew(context.Background(), items)
}

// A batch renews exactly what renew.lua renews, key by key: the token's own acquisition (token and
// fence), never shortening a TTL; a missing key, another owner's lock, another acquisition of the
// token and a key of another type each fail their own renewal only. The lock of another TTL goes
// alone (renew_many.lua with one key), the permit with its own script.
func TestRenew_batchPerKey(t *testing.T) {
	r := newRenewRig(t)
	ctx := context.Background()
	r.n.renewChunk = 4 // several renew_many calls, and one of a lone lock
	var items []RenewItem
	var want []string // "ok", "no", "err"
	add := func(k *Keys, token string, ttl time.Duration, w string) {
		items = append(items, RenewItem{K: k, Token: token, TTL: ttl})
		want = append(want, w)
	}
	own := make([]*Keys, 5)
	for i := range own {
		own[i] = r.take("own"+strconv.Itoa(i), "tok"+strconv.Itoa(i), time.Second)
		add(own[i], "tok"+strconv.Itoa(i), 20*time.Second, "ok")
	}
	long := r.take("long", "tokL", time.Minute)
	add(long, "tokL", 2*time.Second, "ok") // renewed, not shortened
	var missing Keys
	missing.Init("lockkit:", "missing")
	missing.Held(123)
	add(&missing, "tokM", 20*time.Second, "no")
	other := r.take("other", "someone", time.Second)
	add(other, "tokO", 20*time.Second, "no") // another owner's
	again := r.take("again", "tokA", time.Second)
	stale := *again
	stale.Held(again.Fence - 1)
	add(&stale, "tokA", 20*time.Second, "no") // the token's, but another acquisition
	var wrong Keys
	wrong.Init("lockkit:", "wrongtype")
	wrong.Held(7)
	r.rdb.HSet(ctx, wrong.Main, "f", "v")
	add(&wrong, "tokW", 20*time.Second, "err") // a key of another type
	last := r.take("last", "tokZ", time.Second)
	add(last, "tokZ", 20*time.Second, "ok")
	var p Keys
	p.InitSem("lockkit:", "sem", 2)
	res, err := r.n.Acquire(ctx, &AcquireReq{Keys: &p, Token: "tokP", Hold: "0", TTL: time.Second, Limit: 2})
	if err != nil || !res.OK {
		t.Fatalf("permit: %+v %v", res, err)
	}
	p.Held(res.Fence)
	add(&p, "tokP", 20*time.Second, "ok")

	for round := range 2 { // the first loads the scripts (NOSCRIPT, then EVAL), the second is counted
		if round == 1 {
			r.srv.ResetStats(t)
		}
		if err := r.renew(items); err != nil {
			t.Fatalf("renew: %v", err)
		}
	}
	for i, it := range items {
		got := "no"
		switch {
		case it.Err != nil:
			got = "err"
		case it.OK:
			got = "ok"
		}
		if got != want[i] {
			t.Errorf("item %d (%s): %s (%v), want %s", i, it.K.Main, got, it.Err, want[i])
		}
	}
	if err := items[len(items)-3].Err; err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("the key of another type: %v, want its WRONGTYPE", err)
	}
	for _, k := range append(own, last) {
		if d := r.pttl(k); d < 15*time.Second {
			t.Errorf("%s: PTTL %v after a 20 s renewal", k.Main, d)
		}
	}
	if d := r.pttl(long); d < 50*time.Second {
		t.Errorf("a 1 min lock renewed for 2 s: PTTL %v, shortened", d)
	}
	if d := r.pttl(other); d > time.Second {
		t.Errorf("another owner's lock: PTTL %v, renewed", d)
	}
	if d := r.pttl(again); d > time.Second {
		t.Errorf("another acquisition of the token: PTTL %v, renewed", d)
	}
	if n := r.rdb.Exists(ctx, missing.Main).Val(); n != 0 {
		t.Error("a renewal created the missing key")
	}
	// 10 locks of one TTL in chunks of 4 (4, 4, 2), the lock of another TTL alone, and the permit:
	// five scripts.
	st := r.srv.CommandStats(t)
	if calls := st["evalsha"]; calls != 5 || st["eval"] != 0 {
		t.Errorf("%d script calls for 10 locks of a TTL in chunks of 4, one of another and a permit, want 5: %v", calls, st)
	}
}

// The batch's outcome for each case is what renew.lua (Extend) answers alone.
func TestRenew_batchMatchesSingle(t *testing.T) {
	r := newRenewRig(t)
	ctx := context.Background()
	type tc struct {
		name    string
		token   string
		ttl     time.Duration
		prepare func(name, token string) *Keys
	}
	held := func(ttl time.Duration) func(name, token string) *Keys {
		return func(name, token string) *Keys { return r.take(name, token, ttl) }
	}
	cases := []tc{
		{name: "own", token: "a", ttl: 10 * time.Second, prepare: held(time.Second)},
		{name: "longer", token: "b", ttl: time.Second, prepare: held(time.Minute)},
		{name: "released", token: "c", ttl: 10 * time.Second, prepare: func(name, token string) *Keys {
			k := r.take(name, token, time.Second)
			if _, err := r.n.Release(ctx, ReleaseReq{Keys: k, Token: token, Hold: "0", LockTTL: time.Second}); err != nil {
				t.Fatal(err)
			}
			return k
		}},
		{name: "taken", token: "d", ttl: 10 * time.Second, prepare: func(name, token string) *Keys {
			k := r.take(name, "x"+token, time.Second)
			k2 := *k
			return &k2
		}},
		{name: "reacquired", token: "e", ttl: 10 * time.Second, prepare: func(name, token string) *Keys {
			k := r.take(name, token, time.Second)
			r.rdb.Del(ctx, k.Main)
			r.take(name, token, time.Second)
			return k // the first acquisition's fence
		}},
	}
	for _, batch := range []bool{false, true} {
		var items []RenewItem
		for _, c := range cases {
			k := c.prepare(fmt.Sprintf("%s-%v", c.name, batch), c.token)
			items = append(items, RenewItem{K: k, Token: c.token, TTL: c.ttl})
		}
		if batch {
			if err := r.renew(items); err != nil {
				t.Fatal(err)
			}
		} else {
			for i := range items {
				_, items[i].OK, items[i].Err = r.n.TTL(ctx, TTLReq{Keys: items[i].K, Token: items[i].Token, Extend: items[i].TTL})
			}
		}
		for i, it := range items {
			want := cases[i].name == "own" || cases[i].name == "longer"
			if it.Err != nil || it.OK != want {
				t.Errorf("%s (batch %v): ok %v err %v, want ok %v", cases[i].name, batch, it.OK, it.Err, want)
			}
			d := r.pttl(it.K)
			switch cases[i].name {
			case "own":
				if d < 9*time.Second {
					t.Errorf("own (batch %v): PTTL %v", batch, d)
				}
			case "longer":
				if d < 50*time.Second {
					t.Errorf("longer (batch %v): PTTL %v, shortened", batch, d)
				}
			default:
				if d > 10*time.Second {
					t.Errorf("%s (batch %v): PTTL %v, renewed", cases[i].name, batch, d)
				}
			}
		}
	}
}

// A flushed script cache (a restarted server) costs the batch an EVAL, not its renewals; an
// unfenced node (Redlock's) renews any acquisition of the token.
func TestRenew_batchNoScriptAndUnfenced(t *testing.T) {
	r := newRenewRig(t)
	ctx := context.Background()
	var items []RenewItem
	for i := range 3 {
		k := r.take("n"+strconv.Itoa(i), "tok", time.Second)
		items = append(items, RenewItem{K: k, Token: "tok", TTL: 10 * time.Second})
	}
	r.rdb.ScriptFlush(ctx)
	r.srv.ResetStats(t)
	if err := r.renew(items); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if !it.OK || it.Err != nil || r.pttl(it.K) < 9*time.Second {
			t.Errorf("%s after SCRIPT FLUSH: %v %v", it.K.Main, it.OK, it.Err)
		}
	}
	if st := r.srv.CommandStats(t); st["eval"] != 1 || st["evalsha"] != 1 {
		t.Errorf("after SCRIPT FLUSH: %v, want one EVALSHA (NOSCRIPT) and one EVAL", st)
	}
	r.n.Fenced = false
	for i := range items {
		k := *items[i].K
		k.Held(1) // a fence this node never gave: unfenced checks ignore it
		items[i].K, items[i].TTL = &k, 30*time.Second
	}
	if err := r.renew(items); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if !it.OK || r.pttl(it.K) < 25*time.Second {
			t.Errorf("%s unfenced: %v %v", it.K.Main, it.OK, it.Err)
		}
	}
}

// A round whose every call fails reports the error, on every item.
func TestRenew_batchAllFail(t *testing.T) {
	r := newRenewRig(t)
	var items []RenewItem
	for i := range 3 {
		items = append(items, RenewItem{K: r.take("f"+strconv.Itoa(i), "tok", time.Second), Token: "tok", TTL: time.Second})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.n.Renew(ctx, items); err == nil {
		t.Fatal("a cancelled round reported no error")
	}
	for _, it := range items {
		if it.Err == nil || it.OK {
			t.Errorf("%s: %v %v, want the error", it.K.Main, it.OK, it.Err)
		}
	}
}
