package chaos_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/redis/go-redis/v9"
)

// The safety oracle of the semaphore variant (checkPermits): the lock oracle's reasoning with
// bounds, applied to permits, plus checks of what Redis itself held. A watcher reads every
// semaphore's live leases atomically every 25 ms (permitSnap); a read happened at some moment
// between its From and To.

// permitSnap is one atomic read of a semaphore's live leases (expiry after the server's clock).
type permitSnap struct {
	Name   string        `json:"name"`
	From   time.Duration `json:"from"`
	To     time.Duration `json:"to"`
	Leases []lease       `json:"leases,omitempty"`
}

// lease is one live permit in Redis: its token, the time it had left and its holder's limit.
type lease struct {
	Tok   string        `json:"tok"`
	Left  time.Duration `json:"left"`
	Limit int           `json:"limit"`
}

// readPermitsSrc returns, for each permits ZSET in KEYS, the live leases as token, ms left, limit.
const readPermitsSrc = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 1, #KEYS do
  local m = redis.call('ZRANGEBYSCORE', KEYS[i], '(' .. now, '+inf', 'WITHSCORES')
  local row = {}
  for j = 1, #m, 2 do
    row[#row + 1] = m[j]
    row[#row + 1] = tostring(tonumber(m[j + 1]) - now)
    row[#row + 1] = redis.call('ZSCORE', KEYS[i] .. ':limits', m[j]) or '0'
  end
  out[i] = row
end
return out`

// watchPermits reads the leases of every semaphore in limits every 25 ms until stop is closed
// (at once if limits is nil).
func watchPermits(h *history, rdb *redis.Client, limits map[string][]int, stop <-chan struct{}) {
	if limits == nil {
		return
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range limits {
			if !yield(n) {
				return
			}
		}
	})
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = locktest.Key(n, "permits")
	}
	script := redis.NewScript(readPermitsSrc)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		from := h.now()
		v, err := script.Run(ctx, rdb, keys).Slice()
		to := h.now()
		cancel()
		if err != nil || len(v) != len(names) {
			continue
		}
		snaps := make([]permitSnap, len(names))
		for i, n := range names {
			snaps[i] = permitSnap{Name: n, From: from, To: to}
			row, _ := v[i].([]any)
			for j := 0; j+2 < len(row); j += 3 {
				tok, _ := row[j].(string)
				left, _ := strconv.ParseInt(fmt.Sprint(row[j+1]), 10, 64)
				limit, _ := strconv.Atoi(fmt.Sprint(row[j+2]))
				snaps[i].Leases = append(snaps[i].Leases, lease{Tok: tok, Left: time.Duration(left) * time.Millisecond, Limit: limit})
			}
		}
		h.mu.Lock()
		h.permits = append(h.permits, snaps...)
		h.mu.Unlock()
	}
}

// permitHeld reports whether tok holds a live permit of the semaphore name on rdb.
func permitHeld(ctx context.Context, rdb *redis.Client, name, tok string) bool {
	exp, err := rdb.ZScore(ctx, locktest.Key(name, "permits"), tok).Result()
	if err != nil {
		return false
	}
	now, err := rdb.Time(ctx).Result()
	return err == nil && exp > float64(now.UnixMilli())
}

// checkPermits is the oracle of the semaphore variant. Per name: over-limit, fence; over the reads
// of Redis: lease-count, lease-gone, orphan (see leases); then the checks common with locks
// (loss-while-healthy, do-lost, not-cancelled, orphan after a failed acquisition, no-ttl, panic).
func checkPermits(r run) (violations, inconclusive []verdict) {
	o := newOracle(r)
	names, byName := o.byName()
	for _, n := range names {
		o.overLimit(byName[n])
		o.permitFences(byName[n])
	}
	o.leases(byName)
	return o.finish()
}

// A permit can be granted to any attempt of its call: a release hands a freed permit to the
// waiter queued by an earlier attempt (direct handoff), and the waiter may have sent more attempts
// before it learns of the grant. So the only sound "asked for" bound of a permit is its call's
// start (Call), not its last attempt's send (Sent) as for locks.

// overLimit: permit B was granted while holds A1..Ak of the name had each been granted before B's
// call began (Ai returned before B's Call) and stayed live after B returned, with k at
// least the lowest limit among B and A1..Ak: more holders at once than one of them allowed. The
// margin is the k-th longest time an Ai stayed live after B returned; within this process's timer
// lateness it is inconclusive.
func (o *oracle) overLimit(hs []*hold) {
	for _, b := range hs {
		var live []*hold
		for _, a := range hs {
			if a.Tok != b.Tok && a.Ret < b.Call && a.Live > b.Ret {
				if _, excused := o.lossExcuses(a, b.Ret); !excused { // a key loss freed a's permit
					live = append(live, a)
				}
			}
		}
		slices.SortFunc(live, func(x, y *hold) int { return cmp.Compare(y.Live, x.Live) })
		low := b.Limit
		for k, a := range live {
			if low = min(low, a.Limit); k+1 < low {
				continue
			}
			ids := []int{b.ID}
			for _, x := range live[:k+1] {
				ids = append(ids, x.ID)
			}
			margin := a.Live - b.Ret
			v := verdict{Prop: "over-limit", At: b.Ret, Holds: ids, Msg: fmt.Sprintf(
				"%s: permit %d (fence %d, limit %d) was granted while %d earlier permits (holds %v) stayed live, the last %v after it returned; the lowest limit among them is %d",
				b.Name, b.ID, b.Fence, b.Limit, k+1, ids[1:], ms(margin), low)}
			if slack := o.slack(b.Ret-time.Second, a.Live); margin <= slack {
				v.Msg += fmt.Sprintf(" — within this process's timer lateness (%v)", ms(slack))
				o.soft = append(o.soft, v)
			} else {
				o.bad = append(o.bad, v)
			}
			break
		}
	}
}

// permitFences: a permit granted before another's call began has a lower fence, and no two
// permits of a name share a fence.
func (o *oracle) permitFences(hs []*hold) {
	byFence := map[int64]*hold{}
	for _, b := range hs {
		if a := byFence[b.Fence]; a != nil && a.Tok != b.Tok && !o.fenceReset(a, b) && !o.fenceReset(b, a) {
			o.flag("fence", max(a.Ret, b.Ret), []int{a.ID, b.ID}, "%s: permits %d and %d have the same fence %d", b.Name, a.ID, b.ID, b.Fence)
		}
		byFence[b.Fence] = b
		var worst *hold
		for _, a := range hs {
			if a.Ret < b.Call && a.Fence >= b.Fence && (worst == nil || a.Fence > worst.Fence) && !o.fenceReset(a, b) {
				worst = a
			}
		}
		if worst != nil {
			o.flag("fence", b.Ret, []int{worst.ID, b.ID}, "%s: fence %d (permit %d) is not above fence %d (permit %d), which was granted before it was asked for",
				b.Name, b.Fence, b.ID, worst.Fence, worst.ID)
		}
	}
}

// requestDelay bounds how long after it was sent a script can still run: a paused redis-server
// (up to 400 ms) runs what its clients sent when it resumes, and go-redis replays a command whose
// reply was lost.
const requestDelay = 2 * time.Second

// leases checks the reads of Redis:
//   - lease-count: Redis held more live leases of a name than the lowest limit of their holders;
//   - lease-gone: a permit granted before a read and live after it had no live lease in the read
//     (its context outlived its lease);
//   - orphan: a live lease in a read although its holder had let it go (its context was cancelled
//     by Release, a loss or Client.Close, not by the caller's context: that permit is still held
//     until released) or its acquisition had failed, longer ago than the TTL it had, plus
//     requestDelay: a permit nobody holds that outlived its TTL. (A failed waiting call whose path
//     was not healthy until its give-up was sent may keep its place in the queue, and be granted,
//     for its queue timeout more.)
func (o *oracle) leases(byName map[string][]*hold) {
	byTok := map[string]*hold{}
	for i := range o.holds {
		byTok[o.holds[i].Tok] = &o.holds[i]
	}
	fails := map[string]*failed{}
	for i := range o.fails {
		fails[o.fails[i].Tok] = &o.fails[i]
	}
	counted, gone, orphaned := map[string]bool{}, map[int]bool{}, map[string]bool{}
	for _, s := range o.permits {
		valid := map[string]bool{}
		var ids []int
		low := 0
		for _, l := range s.Leases {
			valid[l.Tok] = true
			if low == 0 || l.Limit < low {
				low = l.Limit
			}
			if h := byTok[l.Tok]; h != nil {
				ids = append(ids, h.ID)
			}
		}
		if key := s.Name + fmt.Sprint(ids); len(s.Leases) > low && !counted[key] {
			counted[key] = true
			o.flag("lease-count", s.From, ids, "%s: Redis held %d live leases at once (holds %v), the lowest limit among them is %d", s.Name, len(s.Leases), ids, low)
		}
		for _, h := range byName[s.Name] {
			if h.Ret >= s.From || h.Live <= s.To || valid[h.Tok] || gone[h.ID] {
				continue
			}
			if _, excused := o.lossExcuses(h, s.To); excused {
				continue // a key loss took its lease: it hears of it at its next renewal
			}
			gone[h.ID] = true
			margin := h.Live - s.To
			v := verdict{Prop: "lease-gone", At: s.To, Holds: []int{h.ID}, Msg: fmt.Sprintf(
				"%s: permit %d (fence %d) had no live lease in Redis at %v..%v, yet its context was live %v later", h.Name, h.ID, h.Fence, ms(s.From), ms(s.To), ms(margin))}
			if slack := o.slack(s.From-time.Second, h.Live); margin <= slack {
				v.Msg += fmt.Sprintf(" — within this process's timer lateness (%v)", ms(slack))
				o.soft = append(o.soft, v)
				continue
			}
			o.bad = append(o.bad, v)
		}
		for _, l := range s.Leases {
			var end, ttl time.Duration
			var ids []int
			what := ""
			if h := byTok[l.Tok]; h != nil && h.End > 0 && h.Cause != "" && !strings.HasPrefix(h.Cause, "other:") {
				end, ttl, ids = h.End, h.TTL, []int{h.ID}
				for _, e := range h.Extends {
					ttl = max(ttl, e.TTL)
				}
			} else if f := fails[l.Tok]; h == nil && f != nil {
				end, ttl = f.Ret, f.TTL
				if !o.healthy(f.Client, f.Call, f.Ret+time.Second, 100*time.Millisecond) {
					// Its give-up (the dequeue, sent for up to 1 s after the call returns) may have
					// been lost, or overtaken by its own delayed attempt, which queued it again: a
					// waiter that is gone keeps its place, and can be granted a lease, until its queue
					// timeout passes (docs/guarantees.md: "A waiter that dies while queued…").
					ttl += defaultQueueTimeout
				}
				what = fmt.Sprintf(" (a failed acquisition by client %d, limit %d, call %v: %.120s)", f.Client, f.Limit, ms(f.Call), f.Err)
			} else {
				continue // still held, or unknown to the history
			}
			over := s.From + l.Left - (end + ttl + requestDelay)
			if over <= o.slack(end, s.To) || orphaned[l.Tok] {
				continue
			}
			orphaned[l.Tok] = true
			o.flag("orphan", s.From, ids, "%s: a permit (token %.6s, TTL up to %v) ended or failed at %v, yet Redis still had its lease at %v with %v left%s",
				s.Name, l.Tok, ttl, ms(end), ms(s.From), ms(l.Left), what)
		}
	}
}
