package store

import (
	"context"
	"time"
)

// TakeSet is one all-or-nothing attempt of a set of locks (AcquireAll) on groups, the keys of one
// slot each, in slot order, for r's token: one script per group, in turn. It returns when every
// group was taken (busy nil; fences and sent, one entry per group, filled in), or the keys found
// taken and how long they stay taken, after giving back what the attempt took; or the error that
// ended it, after giving back what the attempt may have taken (through gb when a reply was lost).
func TakeSet(ctx context.Context, st Store, gb *GiveBacks, groups [][]*Keys, r *AcquireReq, fences [][]int64, sent []time.Time) (busy *Keys, retry time.Duration, err error) {
	for gi, g := range groups {
		sent[gi] = time.Now()
		res, err := st.TakeAll(ctx, g, r)
		switch {
		case err != nil:
			if MayHaveRun(err) {
				giveBackAll(gb, g, r, err)
			}
			ReleaseGroups(ctx, st, gb, groups[:gi], r, fences)
			return nil, 0, err
		case res.Busy >= 0:
			ReleaseGroups(ctx, st, gb, groups[:gi], r, fences)
			return g[res.Busy], res.RetryAfter, nil
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
		if _, err := st.ReleaseAll(rctx, g, r.Token, r.Hold, fences[gi]); MayHaveRun(err) {
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
