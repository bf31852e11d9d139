package store

import (
	"context"
	"time"

	"github.com/lockkit/lockkit/core/internal/script"
)

// TakeSet is one all-or-nothing attempt of a set of locks (AcquireAll) on groups, the keys of one
// slot each, in slot order: one script per group, in turn. It returns when every group was taken
// (busy nil; fences and sent filled in, one entry per group), or the keys found taken and for how
// long, or the error that ended it, after giving back what the attempt took or may have taken.
func TakeSet(ctx context.Context, st Store, gb *GiveBacks, groups [][]*Keys, r *AcquireReq, fences [][]int64, sent []time.Time) (busy *Keys, retry time.Duration, err error) {
	for gi, g := range groups {
		sent[gi] = time.Now()
		r.Set = g
		res, err := st.Acquire(ctx, r)
		switch {
		case err != nil:
			if MayHaveRun(err) {
				giveBackAll(gb, g, r, err)
			}
			ReleaseGroups(ctx, st, gb, groups[:gi], r, fences)
			return nil, 0, err
		case !res.OK:
			ReleaseGroups(ctx, st, gb, groups[:gi], r, fences)
			return g[res.BusyAt], res.RetryAfter, nil
		}
		fences[gi] = res.Fences
	}
	return nil, 0, nil
}

// ReleaseGroups gives back what an attempt of TakeSet took of groups (fences: per group), one
// script per group; a group whose reply was lost is given back through gb.
func ReleaseGroups(ctx context.Context, st Store, gb *GiveBacks, groups [][]*Keys, r *AcquireReq, fences [][]int64) {
	for gi, g := range groups {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(r.TTL, 5*time.Second))
		_, err := st.Release(rctx, ReleaseReq{Set: g, Token: r.Token, Hold: r.Hold, Fences: fences[gi], LockTTL: r.TTL})
		if MayHaveRun(err) {
			giveBackAll(gb, g, r, err)
		}
		cancel()
	}
}

// giveBackAll gives back, through gb, r's holds on the locks g, which an attempt may have taken.
func giveBackAll(gb *GiveBacks, g []*Keys, r *AcquireReq, after error) {
	for _, k := range g {
		gb.Give(*k, r.Token, r.Hold, false, r.TTL, after)
	}
}

// parseSet reads acquire_all.lua's reply for n locks: the fences, one per lock, or the index of
// the first lock another owner holds (BusyAt) and how long it stays held.
func parseSet(v any, n int) (AcquireResult, error) {
	x, ok := v.([]any)
	if ok && len(x) == 3 && x[0] == "busy" {
		i, _ := x[1].(int64)
		pttl, _ := x[2].(int64)
		if i >= 1 && int(i) <= n {
			return AcquireResult{Busy: true, BusyAt: int(i) - 1, RetryAfter: time.Duration(max(pttl, 0)) * time.Millisecond}, nil
		}
	}
	if ok && len(x) == n {
		res := AcquireResult{OK: true, Fences: make([]int64, n)}
		for i := range x {
			if res.Fences[i], ok = x[i].(int64); !ok || res.Fences[i] <= 0 {
				return AcquireResult{}, errAcquireReply
			}
		}
		return res, nil
	}
	return AcquireResult{}, errAcquireReply
}

// releaseAll releases one hold of r.Token on each lock of r.Set (one slot; release_all.lua): the
// holds left per lock, -1 where the token does not hold it.
func (n *Node) releaseAll(ctx context.Context, r *ReleaseReq) ([]int64, error) {
	ks, fences := r.Set, r.Fences
	a := script.ReleaseAll{Locks: make([]string, len(ks)), Token: r.Token, Pub: n.pubCmd, Msg: n.id, Hold: r.Hold,
		Fences: make([]any, len(ks))}
	for i, k := range ks {
		a.Locks[i], a.Fences[i] = k.Main, k.fenceArg()
		if fences != nil {
			a.Fences[i] = fences[i]
		}
	}
	v, err := a.Call().Run(ctx, n.send).Slice()
	if err != nil {
		return nil, err
	}
	left := make([]int64, len(v))
	for i := range v {
		left[i], _ = v[i].(int64)
		left[i] = releaseReply(left[i], nil)
	}
	if len(left) != len(ks) {
		return nil, errReleaseReply
	}
	return left, nil
}
