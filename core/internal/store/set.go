package store

import (
	"context"
	"errors"
	"time"

	"github.com/lockkit/lockkit/core/internal/script"
)

// TakeSet is one all-or-nothing attempt of a set of locks (AcquireAll) on groups, the keys of one
// slot each, in slot order, for r's token: one script per group, in turn. It returns when every
// group was taken (busy nil; fences and sent, one entry per group, filled in), or the keys found
// taken and how long they stay taken, after giving back what the attempt took; or the error that
// ended it, after giving back what the attempt may have taken (through gb when a reply was lost).
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

// ReleaseGroups gives back what an attempt of TakeSet took of groups (fences: its fences per
// group), one script per group, so that nothing stays held by a failed attempt; a group whose
// reply was lost is given back through gb.
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

func giveBackAll(gb *GiveBacks, g []*Keys, r *AcquireReq, after error) {
	for _, k := range g {
		gb.Give(*k, r.Token, r.Hold, false, r.TTL, after)
	}
}

// takeAll is one all-or-nothing attempt on the locks r.Set, names of one slot (acquire_all.lua).
func (n *Node) takeAll(ctx context.Context, r *AcquireReq) (AcquireResult, error) {
	ks := r.Set
	locks := make([]string, len(ks))
	for i, k := range ks {
		locks[i] = k.Main
	}
	call := (&script.AcquireAll{Locks: locks, Token: r.Token, TTL: MS(r.TTL), Hold: r.Hold, Label: n.label,
		Waiting: r.Waiting.arg()}).Call()
	var res AcquireResult
	if n.replicas == 0 {
		v, err := call.Run(ctx, n.send).Result()
		if err != nil {
			return AcquireResult{}, err
		}
		return parseSet(v, len(ks))
	}
	acked, err := n.acked(ctx, call, func(v any) (need bool, err error) {
		res, err = parseSet(v, len(ks))
		return err == nil && res.OK, err
	})
	if err != nil || !res.OK {
		return res, err
	}
	if acked < int64(n.replicas) {
		k := *ks[0]
		_, _ = n.releaseAll(context.WithoutCancel(ctx), &ReleaseReq{Set: ks, Token: r.Token, Hold: r.Hold, Fences: res.Fences})
		return AcquireResult{}, &AckError{what: "the locks of " + k.Name + "'s set", acked: acked, want: int64(n.replicas),
			wait: n.replicaWait}
	}
	return res, nil
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
		a.Locks[i] = k.Main
		if fences != nil {
			a.Fences[i] = fences[i]
		} else {
			a.Fences[i] = k.fenceArg()
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
		return nil, errors.New("unexpected release reply")
	}
	return left, nil
}
