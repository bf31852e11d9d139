package gocronlock

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/lockkit/lockkit/election"
)

// Timings of the campaign.
const (
	// campaignRetry is how long a replica waits before campaigning again after Campaign failed
	// (Redis unreachable).
	campaignRetry = time.Second
	// resignTimeout bounds the resignation when the Elector stops.
	resignTimeout = 5 * time.Second
)

// Elector is a gocron.Elector over a package election election: the replica whose Elector leads
// runs every job of its scheduler, the others skip them (gocron.WithDistributedElector). Its term
// is a lockkit lock renewed by core's watchdog, so a leader that stalls (a paused process, a
// network partition) is deposed: its term's context ends before any other replica can lead, and
// from then on IsLeader returns an error. Run jobs with Task so that they get the term's context
// and stop with it. Start it once, and Stop it when the scheduler shuts down.
type Elector struct {
	e    *election.Election
	opt  options
	term atomic.Pointer[election.Term] // while leading

	mu     sync.Mutex
	cancel context.CancelCauseFunc // ends the campaign; nil before Start
	done   chan struct{}           // closed when the campaign has ended
}

// NewElector returns an Elector that campaigns in e (every replica uses an election of the same
// name). It sends nothing to Redis before Start. An option that applies to a Locker only gives an
// error matching ErrInvalid.
func NewElector(e *election.Election, opts ...Option) (*Elector, error) {
	if e == nil {
		return nil, invalid("NewElector needs an *election.Election")
	}
	o, err := build(opts, "NewElector", lockerOnly)
	if err != nil {
		return nil, err
	}
	return &Elector{e: e, opt: o}, nil
}

// Start campaigns in the background until ctx ends or Stop is called: it waits to lead, leads
// until its term ends, and campaigns again after a loss. It returns an error matching ErrInvalid
// if the Elector was started before.
func (el *Elector) Start(ctx context.Context) error {
	el.mu.Lock()
	defer el.mu.Unlock()
	if el.done != nil {
		return invalid("Elector started twice")
	}
	base, cancel := context.WithCancelCause(ctx)
	el.cancel, el.done = cancel, make(chan struct{})
	go el.campaign(base, el.done)
	return nil
}

// Stop ends the campaign: the term's context (and the context of every job running under it) is
// cancelled with ErrStopped, leadership resigned so that another replica leads at once, and Stop
// returns when the campaign has ended, or with ctx's error if ctx ends first. Stop before Start
// does nothing.
func (el *Elector) Stop(ctx context.Context) error {
	el.mu.Lock()
	cancel, done := el.cancel, el.done
	el.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel(ErrStopped)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// campaign runs until base ends.
func (el *Elector) campaign(base context.Context, done chan<- struct{}) {
	defer close(done)
	for base.Err() == nil {
		term, err := el.e.Campaign(base, el.opt.value)
		if err != nil {
			if base.Err() == nil {
				el.log(slog.LevelWarn, "campaign failed", slog.Any("error", err))
				t := time.NewTimer(campaignRetry)
				select {
				case <-t.C:
				case <-base.Done():
					t.Stop()
				}
			}
			continue
		}
		el.term.Store(term)
		el.log(slog.LevelInfo, "leading", slog.Int64("fence", term.Fence()))
		<-term.Context().Done() // lost, or stopping (the term's context derives from base)
		// The ended term stays: IsLeader reports why it ended until the next one begins.
		if base.Err() != nil {
			ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
			_ = term.Resign(ctx)
			cancel()
		} else {
			el.log(slog.LevelWarn, "leadership lost", slog.Any("cause", context.Cause(term.Context())))
		}
	}
}

func (el *Elector) log(level slog.Level, msg string, attrs ...slog.Attr) {
	el.opt.Log().LogAttrs(context.Background(), level, "lockkit: gocronlock: elector: "+msg, attrs...)
}

// IsLeader implements gocron.Elector: nil while this replica leads, else an error matching
// ErrNotLeader. gocron calls it before each run and skips the run on an error. It reads only local
// state: the term's context, which core's watchdog ends before any other replica can lead.
func (el *Elector) IsLeader(context.Context) error {
	_, err := el.current()
	return err
}

// current returns the term while it lasts.
func (el *Elector) current() (*election.Term, error) {
	t := el.term.Load()
	if t == nil {
		return nil, ErrNotLeader
	}
	if t.Context().Err() != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotLeader, context.Cause(t.Context()))
	}
	return t, nil
}

// Task returns a gocron.Task that runs job under the term's context: cancelled when leadership
// ends (a *core.LostError cause when it was lost, ErrStopped after Stop) or gocron stops the job,
// and carrying the leadership lock (core.FromContext, whose Fence is the term's, larger than every
// earlier term's). A run that starts after the term ended returns ErrNotLeader without calling
// job. Task panics on a nil job, as gocron.NewTask's result would fail only when the job first runs.
func (el *Elector) Task(job func(ctx context.Context) error) gocron.Task {
	if job == nil {
		panic(invalid("nil job"))
	}
	return gocron.NewTask(func(ctx context.Context) error {
		t, err := el.current()
		if err != nil {
			return err
		}
		jctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
		defer stop()
		return job(jctx)
	})
}
