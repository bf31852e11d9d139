package cronlock

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/election"
)

// OutcomeFollower: skipped, because this replica does not lead (leader mode, WithLeader).
const OutcomeFollower = "follower"

// WithLeader puts the Locker in leader mode: only the replica that leads election e runs jobs,
// instead of one replica per tick. New starts campaigning in the background (the value is the
// host name and process id) and Stop resigns. While this replica leads, every firing runs the job
// at once, with no Redis round trip, under the term's context (cancelled when leadership is lost,
// before another replica can lead; core.FromContext gives the leadership lock and its Fence, the
// term's fence); on the other replicas the firing is skipped as OutcomeFollower. A run still
// going when its job fires again on the leader is skipped as OutcomeBusy; WithMaxHold cancels a
// run's context as in the default mode (the leader keeps leading). No completion marker is
// written: WithRedisTime, RetryOnError and the markers' at-most-once guard do not apply.
//
// Every replica must use an election of the same name (election.New), which none of the jobs'
// own names needs to match. The trade-offs against the default, a lock per tick, are in the
// package documentation.
func WithLeader(e *election.Election) Option {
	return func(o *options) {
		o.leader = e
		o.Given("WithLeader")
	}
}

// campaignRetry is how long a replica waits before campaigning again after Campaign failed
// (Redis unreachable).
const campaignRetry = time.Second

// campaign runs in leader mode until the Locker stops: it campaigns, keeps the term while it
// lasts, and campaigns again after a loss; at Stop it resigns.
func (l *Locker) campaign() {
	defer close(l.done)
	host, _ := os.Hostname()
	value := host + " " + strconv.Itoa(os.Getpid())
	for l.base.Err() == nil {
		term, err := l.opt.leader.Campaign(l.base, value)
		if err != nil {
			if l.base.Err() == nil {
				l.logLeader("cronlock: campaign failed", slog.LevelWarn, slog.Any("error", err))
				t := time.NewTimer(campaignRetry)
				select {
				case <-t.C:
				case <-l.base.Done():
					t.Stop()
				}
			}
			continue
		}
		l.term.Store(term)
		l.logLeader("cronlock: leading", slog.LevelInfo, slog.Int64("fence", term.Fence()))
		<-term.Context().Done() // lost, or the Locker stopped (the term's context derives from base)
		l.term.Store(nil)
		if cause := context.Cause(term.Context()); errors.Is(cause, ErrStopped) {
			ctx, cancel := context.WithTimeout(context.Background(), campaignRetry)
			_ = term.Resign(ctx)
			cancel()
		} else {
			l.logLeader("cronlock: leadership ended", slog.LevelWarn, slog.Any("cause", cause))
		}
	}
}

func (l *Locker) logLeader(msg string, level slog.Level, attrs ...slog.Attr) {
	l.opt.Log().LogAttrs(context.Background(), level, "lockkit: "+msg, attrs...)
}

// runAsLeader runs the job for ev.Tick if this replica leads (leader mode).
func (j *job) runAsLeader(ev *Event) {
	l := j.l
	term := l.term.Load()
	if term == nil || term.Context().Err() != nil {
		ev.Outcome = OutcomeFollower
		l.report(l.base, ev)
		return
	}
	ctx := context.WithValue(term.Context(), tickKey{}, ev.Tick)
	if !j.running.CompareAndSwap(false, true) {
		ev.Outcome = OutcomeBusy
		l.report(ctx, ev)
		return
	}
	defer j.running.Store(false)
	var limit *core.MaxHoldError
	if d := maxHold(l.opt.maxHold, l.opt.TTL, j.sched, ev.Tick); d > 0 {
		limit = &core.MaxHoldError{Name: j.name, Limit: d}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, limit)
		defer cancel()
	}
	ev.Fence = term.Fence()
	start := time.Now()
	jobErr := j.call(ctx)
	ev.Duration = time.Since(start)
	ev.Outcome, ev.Err = OutcomeRan, jobErr
	if jobErr != nil {
		ev.Outcome = OutcomeFailed
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, core.ErrLost):
		ev.Outcome, ev.Err = OutcomeLost, errors.Join(jobErr, cause)
	case limit != nil && cause == error(limit):
		ev.Outcome, ev.Err = OutcomeMaxHold, errors.Join(jobErr, cause)
	}
	l.report(ctx, ev)
}
