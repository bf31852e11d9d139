package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// event is one line of watch's output.
type event struct {
	Time        time.Time   `json:"time"`
	Event       string      `json:"event"` // state, acquired, handoff, released, force-released, expired, free, waiting
	Fence       int64       `json:"fence,omitempty"`
	Holder      *jsonHolder `json:"holder,omitempty"`
	TTLMS       int64       `json:"ttl_ms,omitempty"`
	FairWaiters int         `json:"fair_waiters"`
	Subscribers int         `json:"subscribed_processes"`
}

func setupWatch(fs *flag.FlagSet) runner {
	var forD, interval time.Duration
	durationVar(fs, &forD, "for", 0, "stop after this long (default: until interrupted)")
	durationVar(fs, &interval, "interval", 100*time.Millisecond, "how often to read the lock")
	return func(ctx context.Context, e *env, args []string) error {
		if interval < time.Millisecond {
			return usageError{error: fmt.Errorf("--interval %v too short: want 1ms or more", interval)}
		}
		return cmdWatch(ctx, e, args[0], forD, interval)
	}
}

// cmdWatch prints what happens to a lock: from its release channel (releases, as they happen) and
// from polling (acquisitions, handoffs, expiries, waiters).
func cmdWatch(ctx context.Context, e *env, name string, forD, interval time.Duration) error {
	locks, rdb, closeAll, err := e.open()
	if err != nil {
		return err
	}
	defer closeAll()
	if forD > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, forD)
		defer cancel()
	}
	w := &watcher{locks: locks, rdb: rdb, name: name, out: e.out, json: e.json}
	w.ch = e.prefix + "{" + w.name + "}:released"
	return w.run(ctx, interval)
}

type watcher struct {
	locks *core.Client
	rdb   redis.UniversalClient
	name  string
	ch    string
	out   io.Writer
	json  bool

	last     core.LockInfo
	subs     int
	released bool // a release message came since the last poll that saw the lock held
}

func (w *watcher) run(ctx context.Context, interval time.Duration) error {
	var ps *redis.PubSub
	cl, cluster := w.rdb.(*redis.ClusterClient)
	if cluster {
		ps = cl.SSubscribe(ctx, w.ch)
	} else {
		ps = w.rdb.Subscribe(ctx, w.ch)
	}
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("subscribe: %w", err)
	}
	msgs := ps.Channel()
	info, subs, err := w.read(ctx)
	if err != nil {
		return err
	}
	w.last, w.subs = info, subs
	w.emit("state", info)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var settle time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			w.emit(releaseKind(m), w.last)
			w.released = true
			// Read the lock once the woken waiter had time to take it: a handoff then shows as
			// one, rather than as a free lock and an acquisition, whatever the timing.
			settle = time.Now().Add(handoffWithin)
			continue
		case now := <-tick.C:
			if now.Before(settle) {
				continue
			}
		}
		if err := w.poll(ctx, msgs); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// read reads the lock and how many processes are subscribed to its release channel (waiting, or
// waited within the last seconds), not counting this one.
func (w *watcher) read(ctx context.Context) (core.LockInfo, int, error) {
	info, err := w.locks.Inspect(ctx, w.name)
	if err != nil {
		return info, 0, err
	}
	var n map[string]int64
	if cl, ok := w.rdb.(*redis.ClusterClient); ok {
		n, err = cl.PubSubShardNumSub(ctx, w.ch).Result()
	} else {
		n, err = w.rdb.PubSubNumSub(ctx, w.ch).Result()
	}
	if err != nil {
		return info, 0, err
	}
	return info, max(int(n[w.ch])-1, 0), nil
}

// handoffWithin is how long after a release watch reads the lock: a waiter woken by the release
// takes it within a few milliseconds.
const handoffWithin = 50 * time.Millisecond

// releaseKind tells a forced release (Client.ForceRelease) from a holder's.
func releaseKind(m *redis.Message) string {
	if strings.HasPrefix(m.Payload, "c:force/") {
		return "force-released"
	}
	return "released"
}

func (w *watcher) poll(ctx context.Context, msgs <-chan *redis.Message) error {
	info, subs, err := w.read(ctx)
	if err != nil {
		return err
	}
	was, now := w.last, info
	changed := was.Held != now.Held || (now.Held && now.Fence != was.Fence)
	if changed && was.Held && !w.released {
		// The release message may trail the poll's answer (another connection): wait a moment.
		select {
		case m := <-msgs:
			w.emit(releaseKind(m), was)
			w.released = true
		case <-time.After(50 * time.Millisecond):
			w.emit("expired", was) // not released: its holder stopped renewing, or lost it
		}
	}
	switch {
	case changed && now.Held && was.Held:
		w.emit("handoff", now)
	case changed && now.Held:
		w.emit("acquired", now)
	case changed:
		w.emit("free", now)
	}
	if changed || !now.Held {
		w.released = false
	}
	w.last = now
	if subs != w.subs || now.Queued != was.Queued {
		w.subs = subs
		w.emit("waiting", now)
	}
	return nil
}

func (w *watcher) emit(kind string, info core.LockInfo) {
	ev := event{Time: time.Now().UTC(), Event: kind, FairWaiters: info.Queued, Subscribers: w.subs}
	if info.Held {
		ev.Fence = info.Fence
		if kind == "state" || kind == "acquired" || kind == "handoff" {
			ev.TTLMS = info.TTL.Milliseconds()
		}
		if len(info.Holders) > 0 {
			h := toJSON(info).Holders[0]
			ev.Holder = &h
		}
	}
	if w.json {
		_ = printJSON(w.out, ev)
		return
	}
	line := ev.Time.Format("15:04:05.000") + " " + kind
	switch {
	case kind == "waiting":
		line += fmt.Sprintf(" fair=%d processes=%d", ev.FairWaiters, ev.Subscribers)
	case kind == "state" && !info.Held:
		line += " free"
	case info.Held && len(info.Holders) > 0:
		line += fmt.Sprintf(" fence=%d holder=%s", info.Fence, who(info.Holders[0]))
		if ev.TTLMS > 0 {
			line += " ttl=" + dur(info.TTL)
		}
	}
	fmt.Fprintln(w.out, line)
}
