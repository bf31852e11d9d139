package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// event is one line of watch's output: the name's state, or what happened to one holder.
type event struct {
	Time        time.Time   `json:"time"`
	Event       string      `json:"event"` // state, acquired, handoff, released, force-released, expired, free, waiting
	Mode        string      `json:"mode,omitempty"`
	Fence       int64       `json:"fence,omitempty"`
	Holder      *jsonHolder `json:"holder,omitempty"`
	TTLMS       int64       `json:"ttl_ms,omitempty"`
	Free        bool        `json:"free,omitempty"` // state and free: nothing holds the name
	Queued      int         `json:"queued"`
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

// cmdWatch prints what happens to a name: from polling (acquisitions, handoffs, holds ended,
// waiters) and from its release channels (which tell a forced release).
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
	base := e.prefix + "{" + name + "}"
	w := &watcher{locks: locks, rdb: rdb, name: name, key: base, out: e.out, json: e.json,
		chans: releaseChannels(e.prefix, name), deadline: map[holderID]time.Time{}}
	return w.run(ctx, interval)
}

// holderID tells holders apart: a renewal or a re-entry keeps it, a new acquisition changes it.
type holderID struct {
	mode, digest string
	fence        int64
}

func idOf(h core.HolderInfo) holderID { return holderID{h.Mode, h.Digest, h.Fence} }

// message is a release message not yet matched with the end of a hold.
type message struct {
	channel int // index in watcher.chans
	force   bool
	at      time.Time
}

type watcher struct {
	locks *core.Client
	rdb   redis.UniversalClient
	name  string
	key   string   // the lock's key
	chans []string // the release channels of the lock, the semaphore, the read-write lock
	out   io.Writer
	json  bool

	last     core.LockInfo
	deadline map[holderID]time.Time // by the local clock: a holder of last lives at least until then
	subs     int
	pending  []message
}

func (w *watcher) run(ctx context.Context, interval time.Duration) error {
	var ps *redis.PubSub
	cl, cluster := w.rdb.(*redis.ClusterClient)
	if cluster {
		ps = cl.SSubscribe(ctx, w.chans...)
	} else {
		ps = w.rdb.Subscribe(ctx, w.chans...)
	}
	defer ps.Close()
	for range w.chans { // the subscriptions' confirmations
		if _, err := ps.Receive(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("subscribe: %w", err)
		}
	}
	msgs := ps.Channel()
	sent := time.Now()
	info, subs, err := w.read(ctx)
	if err != nil {
		return err
	}
	w.last, w.subs = info, subs
	w.track(info, sent)
	if !info.Held {
		w.emit("state", info, nil)
	}
	for _, h := range info.Holders {
		w.emit("state", info, &h)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var settle time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			w.note(m)
			// Read the name once the woken waiter had time to take it: a handoff then shows as
			// one, rather than as a free name and an acquisition, whatever the timing.
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

// note keeps a release message until a poll finds the hold it ended.
func (w *watcher) note(m *redis.Message) {
	for i, c := range w.chans {
		if m.Channel == c {
			w.pending = append(w.pending, message{channel: i, force: strings.HasPrefix(m.Payload, "c:force/"), at: time.Now()})
		}
	}
}

// read reads the name and how many processes are subscribed to its release channels (waiting, or
// waited within the last 3 s; waiters.go), not counting this one nor other watches.
func (w *watcher) read(ctx context.Context) (core.LockInfo, int, error) {
	info, err := w.locks.Inspect(ctx, w.name)
	if err != nil {
		return info, 0, err
	}
	subs, err := subscribed(ctx, w.rdb, w.chans, 1)
	return info, subs, err
}

// track records when each holder's lease ends at the earliest: its TTL counted from the moment the
// read was sent (Redis read it later).
func (w *watcher) track(info core.LockInfo, sent time.Time) {
	clear(w.deadline)
	for _, h := range info.Holders {
		w.deadline[idOf(h)] = sent.Add(h.TTL)
	}
}

// handoffWithin is how long after a release watch reads the name: a waiter woken by the release
// takes it within a few milliseconds.
const handoffWithin = 50 * time.Millisecond

// channelOf returns the index of the release channel of a mode.
func channelOf(mode string) int {
	switch mode {
	case "permit":
		return 1
	case "read", "write":
		return 2
	}
	return 0
}

func (w *watcher) poll(ctx context.Context, msgs <-chan *redis.Message) error {
	sent := time.Now()
	info, subs, err := w.read(ctx)
	if err != nil {
		return err
	}
	seen := time.Now()
	was := w.last
	now := map[holderID]bool{}
	for _, h := range info.Holders {
		now[idOf(h)] = true
	}
	ended := 0
	for _, h := range was.Holders {
		if now[idOf(h)] {
			continue
		}
		ended++
		kind, err := w.ended(ctx, h, info, seen, msgs)
		if err != nil {
			return err
		}
		w.emit(kind, was, &h)
	}
	before := map[holderID]bool{}
	for _, h := range was.Holders {
		before[idOf(h)] = true
	}
	for _, h := range info.Holders {
		if before[idOf(h)] {
			continue
		}
		kind := "acquired"
		if ended > 0 {
			kind = "handoff"
		}
		w.emit(kind, info, &h)
	}
	if was.Held && !info.Held {
		w.emit("free", info, nil)
	}
	w.last = info
	w.track(info, sent)
	w.pending = dropOld(w.pending, time.Now().Add(-time.Second))
	if subs != w.subs || queued(info) != queued(was) {
		w.subs = subs
		w.emit("waiting", info, nil)
	}
	return nil
}

// ended tells how a hold that a poll no longer finds ended: force-released or released when a
// message on its release channel says so; else released when the lock's key holds a free value
// (a release leaves one; an expiry leaves no key), or when it ended before its lease could run
// out; else expired: its holder died or stopped renewing.
func (w *watcher) ended(ctx context.Context, h core.HolderInfo, now core.LockInfo, seen time.Time, msgs <-chan *redis.Message) (string, error) {
	ch := channelOf(h.Mode)
	take := func() (string, bool) {
		for i, m := range w.pending {
			if m.channel == ch {
				w.pending = append(w.pending[:i], w.pending[i+1:]...)
				if m.force {
					return "force-released", true
				}
				return "released", true
			}
		}
		return "", false
	}
	if kind, ok := take(); ok {
		return kind, nil
	}
	// The message may trail the poll's answer (another connection): wait a moment for it.
	timeout := time.After(handoffWithin)
wait:
	for {
		select {
		case m := <-msgs:
			w.note(m)
			if kind, ok := take(); ok {
				return kind, nil
			}
		case <-timeout:
			break wait
		}
	}
	if h.Mode == "lock" && !now.Held {
		v, err := w.rdb.Get(ctx, w.key).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return "expired", nil
		case err != nil:
			return "", err
		case strings.HasPrefix(v, "\x02"), strings.HasPrefix(v, "\x00"):
			// \x02 BASE FENCE (the previous version's: "" FENCE BASE): freed by a release (docs/keys.md)
			return "released", nil
		}
	}
	if d, ok := w.deadline[idOf(h)]; ok && seen.Before(d) {
		return "released", nil
	}
	return "expired", nil
}

// dropOld drops the messages that came before t: they matched no hold a poll saw end.
func dropOld(ms []message, t time.Time) []message {
	kept := ms[:0]
	for _, m := range ms {
		if !m.at.Before(t) {
			kept = append(kept, m)
		}
	}
	return kept
}

// emit prints an event about the name (h nil: state free, free, waiting) or about one of its
// holders: its mode, fence, who, and its TTL when the event starts or shows a hold.
func (w *watcher) emit(kind string, info core.LockInfo, h *core.HolderInfo) {
	ev := event{Time: time.Now().UTC(), Event: kind, Queued: queued(info), Subscribers: w.subs,
		Free: h == nil && (kind == "state" || kind == "free")}
	live := kind == "state" || kind == "acquired" || kind == "handoff"
	if h != nil {
		j := holderJSON(*h)
		ev.Mode, ev.Fence, ev.Holder = h.Mode, h.Fence, &j
		if live {
			ev.TTLMS = h.TTL.Milliseconds()
		}
	}
	if w.json {
		_ = printJSON(w.out, ev)
		return
	}
	line := ev.Time.Format("15:04:05.000") + " " + kind
	switch {
	case h != nil:
		line += " " + holderLine(*h, info.Limit, live)
	case kind == "state":
		line += " free"
	}
	if kind == "waiting" || kind == "state" {
		line += fmt.Sprintf(" queued=%d processes=%d", ev.Queued, ev.Subscribers)
	}
	fmt.Fprintln(w.out, line)
}
