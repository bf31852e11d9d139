package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lockkit/lockkit/core/internal/script"
)

// HolderLabel is the label the acquire scripts record for a Client's WithLabel: "host pid label".
func HolderLabel(label string) string {
	host, err := os.Hostname()
	if err != nil || host == "" || strings.ContainsAny(host, " \x00") {
		host = "unknown"
	}
	return host + " " + strconv.Itoa(os.Getpid()) + " " + strings.ReplaceAll(label, "\x00", "?")
}

// digest returns the digest of an owner token as Holder reports it.
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:6])
}

var errInspectReply = errors.New("unexpected inspect reply")

// parseInspect reads inspect.lua's reply.
func parseInspect(v []any) (Info, error) {
	var info Info
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
		if lv.token != "" && lv.token[0] != 1 { // (a byte 1: a family's mark, see lockValue)
			if pttl > 0 {
				info.TTL = time.Duration(pttl) * time.Millisecond
			}
			h := Holder{Mode: "lock", Digest: digest(lv.token), Holds: int64(len(strings.Fields(lv.holds))),
				Fence: lv.fence, TTL: info.TTL}
			parseHolder(&h, strconv.FormatInt(acquiredMS(lv.acquired), 10)+" "+lv.label, nowMS)
			info.Holders = append(info.Holders, h)
		}
	}
	parseLeases(permits, nowMS, func(h Holder, limit int) {
		if limit > 0 && (info.Limit == 0 || limit < info.Limit) {
			info.Limit = limit
		}
		h.Mode = "permit"
		info.Permits = append(info.Permits, h)
		info.Holders = append(info.Holders, h)
	})
	parseLeases(rw, nowMS, func(h Holder, limit int) {
		if limit == 1 {
			h.Mode = "write"
			info.Writer = &h
		} else {
			h.Mode = "read"
			info.Readers = append(info.Readers, h)
		}
		info.Holders = append(info.Holders, h)
	})

	// The holders' longest TTL and highest fence, where the lock's own do not say.
	var ttl time.Duration
	var fence int64
	for _, h := range info.Holders {
		ttl, fence = max(ttl, h.TTL), max(fence, h.Fence)
	}
	if len(info.Holders) > 0 {
		info.Held, info.Mode, info.TTL = true, info.Holders[0].Mode, cmp.Or(info.TTL, ttl)
		if info.Mode != "lock" {
			info.Fence = fence
		}
	}
	return info, nil
}

// parseLeases reads the leases inspect.lua lists (token, expiry, limit, fence, label each) and
// passes each holder and its limit to add.
func parseLeases(list []any, nowMS int64, add func(h Holder, limit int)) {
	for i := 0; i+4 < len(list); i += 5 {
		tok, _ := list[i].(string)
		expiry, _ := list[i+1].(string)
		limit, _ := list[i+2].(string)
		fence, _ := list[i+3].(string)
		label, _ := list[i+4].(string)
		h := Holder{Digest: digest(tok), Holds: 1}
		h.Fence, _ = strconv.ParseInt(fence, 10, 64)
		if at, err := strconv.ParseInt(expiry, 10, 64); err == nil {
			h.TTL = time.Duration(at-nowMS) * time.Millisecond
		}
		n, _ := strconv.Atoi(limit)
		parseHolder(&h, label, nowMS)
		add(h, n)
	}
}

// lockValue is a lock's value in Redis (see internal/script/lua/lock.lua): NUL-separated fields.
// A token that starts with a byte 1 is a family's mark (lock.lua): permits or read-write holds
// have the name, and the lock key only keeps its fence.
type lockValue struct {
	token, acquired, holds, label string
	fence                         int64
}

// parseLockValue reads a lock's value: TOKEN FENCE HOLDS W BASE PREV ACQUIRED LABEL [EXTRA] when
// held (a byte 2 before BASE), a byte 2, BASE, NUL, FENCE when free ("" FENCE BASE, the previous
// version's free value, is read too; its held value has the same fields but PREV, and reads the
// same here).
func parseLockValue(v string) (lockValue, bool) {
	if v != "" && v[0] == 2 {
		_, fs, ok := strings.Cut(v, "\x00")
		fence, err := strconv.ParseInt(fs, 10, 64)
		if !ok || err != nil {
			return lockValue{}, false
		}
		return lockValue{fence: fence}, true
	}
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

// acquiredMS reads a lock's ACQUIRED field, "SECONDS.MICROSECONDS" (the server's clock) or
// milliseconds (Redlock, the client's clock), as milliseconds.
func acquiredMS(s string) int64 {
	sec, us, dot := strings.Cut(s, ".")
	a, _ := strconv.ParseInt(sec, 10, 64)
	if !dot {
		return a
	}
	b, _ := strconv.ParseInt(us, 10, 64)
	return time.Unix(a, b*1000).UnixMilli()
}

// parseHolder fills h from the label an acquisition recorded, "acquired-ms host pid label" (empty
// when taken by an older lockkit version).
func parseHolder(h *Holder, m string, nowMS int64) {
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

// ReadValue reads a lock key's value (GET): the owner's token ("" when free), its hold ids and
// the fence (core's tests read what Redis records through it).
func ReadValue(v string) (token string, holds []string, fence int64, ok bool) {
	lv, ok := parseLockValue(v)
	return lv.token, strings.Fields(lv.holds), lv.fence, ok
}

// Inspect reads the name with inspect.lua.
func (n *Node) Inspect(ctx context.Context, r NameReq) (Info, error) {
	l, p := r.Lock, r.Sem
	var rw Keys
	rw.InitRW(l.Main, l.Name, 0)
	v, err := (&script.Inspect{Lock: l.Main, Queue: l.Queue, Deadlines: l.Deadlines,
		Permits: p.Main, Limits: p.Sem.Limits, Fences: p.Sem.Fences, PQueue: p.Queue, PDeadlines: p.Deadlines,
		RW: rw.Main, RWLimits: rw.Sem.Limits, RWFences: rw.Sem.Fences, RWQueue: rw.Queue, RWDeadlines: rw.Deadlines}).Call().
		Run(ctx, n.send).Slice()
	if err != nil {
		return Info{}, err
	}
	return parseInspect(v)
}

// ForceRelease deletes every hold of the name with force_release.lua.
func (n *Node) ForceRelease(ctx context.Context, r NameReq) (bool, error) {
	l, p, msg := r.Lock, r.Sem, r.Msg
	var rw Keys
	rw.InitRW(l.Main, l.Name, 0)
	v, err := (&script.ForceRelease{Lock: l.Main, Queue: l.Queue, Deadlines: l.Deadlines, Permits: p.Main,
		Limits: p.Sem.Limits, Fences: p.Sem.Fences, PQueue: p.Queue, PDeadlines: p.Deadlines, RW: rw.Main,
		RWLimits: rw.Sem.Limits, RWFences: rw.Sem.Fences, RWQueue: rw.Queue, RWDeadlines: rw.Deadlines, Pub: n.pubCmd,
		Msg: msg}).Call().Run(ctx, n.send).Int64()
	return v > 0, err
}
