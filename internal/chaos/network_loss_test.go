package chaos_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/chaos"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// lockEnd is when a lost lock could leave Redis on its own, and what that was.
type lockEnd struct {
	at   time.Time
	what string
}

// keyDue names the end of a lock whose server kept it: its key's expiry as last renewed (the
// holder's give-back may have deleted it earlier).
const keyDue = "its key was due to expire in Redis (as last renewed)"

// judgeLoss is the network scenarios' verdict on a hold lost to a fault: its context must end before
// its lock could leave Redis on its own (end) and before the other client was granted the name.
// reported is when the loss was reported (the Lost hook: right after the context's cancellation,
// before anything of the hold is given back), granted when the other client's Acquire returned
// (after the grant). It returns what happened, in order, and whether that breaks the promise.
func judgeLoss(reported time.Time, end lockEnd, granted time.Time) (string, bool) {
	what := ""
	switch {
	case granted.Before(reported):
		what = "the other client had the name before the holder's loss was reported"
	case !end.at.After(reported):
		what = "the holder's loss was reported after its lock could have left Redis"
	default:
		return "", false
	}
	return what + ": " + chaos.InOrder(
		chaos.Event{What: "the holder's loss was reported (its context cancelled by then)", At: reported},
		chaos.Event{What: end.what, At: end.at},
		chaos.Event{What: "the other client's Acquire returned with the name", At: granted},
	), true
}

// The latency scenario's report of issue 44, made deterministic: "the holder was cancelled
// -344.012769ms after its lock expired in Redis, the other client got it 168.901µs before the
// cancel". Late replies let a renewal run in Redis (the key stayed 344 ms more) while the holder
// declared its hold expired at its validity deadline, cancelled its context and gave the hold back:
// the other client was granted the name through that give-back, and the checker, which took the
// cancellation's time from the Lost hook, found the hook ran after that grant (on a loaded host the
// hook ran late; here a hook waits for the other client, as a starved one would be overtaken).
// Here the renewals stall and the test keeps the key in Redis for a minute, as a renewal that ran
// but answered too late would: only the holder's give-back can let the other client in. The loss
// is reported before the give-back is sent, so no grant can come before it.
func TestNetwork_lossReportedBeforeTheGiveBack(t *testing.T) {
	srv := redistest.Start(t)
	granted := make(chan time.Time, 1)
	slow := core.Hook{Lost: func(context.Context, core.HoldInfo) {
		select {
		case at := <-granted:
			granted <- at
		case <-time.After(2 * time.Second):
		}
	}}
	losses := newLossLog()
	rdb := srv.Client(t)
	stall := &stallRenewals{}
	rdb.AddHook(stall)
	holder := locktest.NewClient(t, rdb, core.WithHook(slow), core.WithHook(losses.hook()))
	other := locktest.NewClient(t, srv.Client(t))
	watch := srv.Client(t)
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "acct", netTTL)
	if err != nil {
		t.Fatal(err)
	}
	stall.on.Store(true)
	if ok, err := watch.PExpire(ctx, l.Key(), time.Minute).Result(); err != nil || !ok {
		t.Fatalf("PEXPIRE: %v, %v", ok, err)
	}
	expiry := watchExpiry(watch, l.Key(), l.Token())
	go func() {
		o, err := other.Acquire(ctx, "acct", netTTL, core.WithWait(time.Minute))
		if err != nil {
			t.Errorf("other acquire: %v", err)
			return
		}
		granted <- time.Now()
		_ = o.Release(ctx)
	}()
	ev, ok := losses.wait(l.Fence(), 10*time.Second)
	if !ok {
		t.Fatal("no loss reported")
	}
	var at time.Time
	select {
	case at = <-granted:
	case <-time.After(10 * time.Second):
		t.Fatal("the other client was never granted the name: the hold was not given back")
	}
	if msg, bad := judgeLoss(ev.at, lockEnd{<-expiry, keyDue}, at); bad {
		t.Errorf("VIOLATION: %s", msg)
	}
}

// The network scenarios' report lines tell what happened in order, with no negative duration.
func TestJudgeLoss_saysWhatHappenedInOrder(t *testing.T) {
	t0 := time.Now()
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	due := func(ms float64) lockEnd { return lockEnd{at(ms), keyDue} }
	for _, c := range []struct {
		name              string
		reported, granted time.Time
		end               lockEnd
		want              string
	}{
		{"in time", at(0), at(1), due(344), ""},
		{"granted first (issue 44's report)", at(0.169), at(0), due(344),
			"the other client had the name before the holder's loss was reported: the other client's Acquire returned with the name, " +
				"then 169µs later the holder's loss was reported (its context cancelled by then), then 343.8ms later " + keyDue},
		{"reported after the key's expiry", at(5), at(6), due(2),
			"the holder's loss was reported after its lock could have left Redis: " + keyDue + ", then 3ms later the holder's loss was " +
				"reported (its context cancelled by then), then 1ms later the other client's Acquire returned with the name"},
		{"reported as Redis restarted", at(0), at(0), lockEnd{at(0), "Redis restarted and forgot the lock"},
			"the holder's loss was reported after its lock could have left Redis: the holder's loss was reported (its context " +
				"cancelled by then), then at the same moment Redis restarted and forgot the lock, then at the same moment the other " +
				"client's Acquire returned with the name"},
	} {
		msg, bad := judgeLoss(c.reported, c.end, c.granted)
		if bad != (c.want != "") || msg != c.want {
			t.Errorf("%s: %v %q\nwant %q", c.name, bad, msg, c.want)
		}
	}
}

// stallRenewals, once on, holds every pipeline (the watchdog's renewals) back before it is sent,
// until its context ends (at the hold's validity deadline).
type stallRenewals struct{ on atomic.Bool }

func (h *stallRenewals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stallRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *stallRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !h.on.Load() {
			return next(ctx, cmds)
		}
		<-ctx.Done()
		return ctx.Err()
	}
}
