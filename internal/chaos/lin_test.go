package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/redis/go-redis/v9"
)

// linEvent is one operation of a lock history, as a child process records it (times in Unix µs).
type linEvent struct {
	Kind   string `json:"k"` // "acq", "rel" or "exp" (the lock left Redis without a release: lost)
	Name   string `json:"n"` // the lock: a new one every linSegment, so that histories stay short
	Client int    `json:"c"`
	Tok    string `json:"t"`
	Call   int64  `json:"a"`
	Ret    int64  `json:"b"`
	Out    string `json:"o"` // acq: ok, busy, unknown; rel: ok, notheld, unknown; exp: "", lost, notheld
	Fence  int64  `json:"f,omitempty"`
	// Live, for an exp of a held lock: when its holder stopped using it (the loss was reported, or
	// Release was called). The lock must not have left Redis before then either (see holderView):
	// core reports a loss right after cancelling the context and before giving the hold back.
	Live int64 `json:"l,omitempty"`
	// GiveBack, for an exp of a lock lost by expiry: when its loss was reported (Live). core gives
	// an expired hold back (releases it) right after reporting its loss, so the lock may leave
	// Redis from then on, before Call. That is before the validity deadline when the late-timer
	// guard ended the hold early (docs/guarantees.md, "Late timers"): bounding the give-back by
	// the deadline reported a Redis view that was not linearizable (stop 51's CI run 1).
	GiveBack int64 `json:"g,omitempty"`
}

// linConfig is what the parent tells a lin child.
type linConfig struct {
	Proc, Clients int
	Dur, TTL      time.Duration
}

func (c linConfig) String() string {
	return fmt.Sprintf("%d,%d,%d,%d", c.Proc, c.Clients, c.Dur, c.TTL)
}

func parseLinConfig(s string) (linConfig, error) {
	var c linConfig
	var dur, ttl int64
	_, err := fmt.Sscanf(strings.ReplaceAll(s, ",", " "), "%d %d %d %d", &c.Proc, &c.Clients, &dur, &ttl)
	c.Dur, c.TTL = time.Duration(dur), time.Duration(ttl)
	return c, err
}

func newOwnerToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// linChild runs cfg.Clients clients, each with its own connection and core.Client, that take and
// release one lock in a loop for cfg.Dur, and prints every operation as a JSON line "op {...}".
// The outcome of an operation that failed with a Redis error is unknown: it may have happened.
// A lock whose context was cancelled by a loss is recorded as an "exp" operation: it left Redis at
// some point between the cancellation and TTL later (the holder stopped renewing it by then).
func linChild(addr, cfgText string, out io.Writer) error {
	cfg, err := parseLinConfig(cfgText)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	emit := func(ev linEvent) {
		b, _ := json.Marshal(ev)
		mu.Lock()
		fmt.Fprintf(out, "op %s\n", b)
		mu.Unlock()
	}
	// How late this process's timers ran: a watchdog that fires later than the drift cannot cancel a
	// lock before it expires, and the parent must know whether that happened.
	p := runProbe()
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Clients)
	end := time.Now().Add(cfg.Dur)
	for i := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := linClient(addr, cfg.Proc*100+i, cfg.TTL, end, emit); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	p.close()
	fmt.Fprintf(out, "late %d\n", p.take())
	close(errs)
	return <-errs
}

func us(t time.Time) int64 { return t.UnixMicro() }

// linSegment is how long the clients use one lock name before moving to the next: every process
// derives the name from the clock, and each name's history is checked on its own (a lock's
// linearizability does not depend on other locks), which keeps porcupine's search small.
const linSegment = 4 * time.Second

func linName(t time.Time) string { return fmt.Sprintf("lin-%d", t.UnixNano()/int64(linSegment)) }

func linClient(addr string, id int, ttl time.Duration, end time.Time, emit func(linEvent)) error {
	// MaxRetries -1: every failed script shows in the history as an operation of unknown outcome
	// (replayed scripts are retry_test.go's subject).
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1})
	defer rdb.Close()
	sends := &sendLog{renewed: map[context.Context]time.Time{}, lost: map[context.Context]loss{}}
	rdb.AddHook(sends)
	c, err := core.New(rdb, core.WithHook(sends.hook()))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	ctx, cancel := background()
	defer cancel()
	// A lock left Redis within slack of the moment its holder stopped renewing it: TTL, plus how long
	// a renewal already sent may wait in a stalled network or a paused Redis (the faults last at
	// most 2×TTL) before Redis runs it.
	slack := int64(3*ttl/time.Microsecond) + 50_000
	for time.Now().Before(end) {
		tok := newOwnerToken()
		call := time.Now()
		name := linName(call)
		sends.acquiring(tok)
		l, err := c.Acquire(ctx, name, ttl, core.WithToken(tok), core.WithWait(ttl/2+mrand.N(ttl)))
		ret := time.Now()
		acqSent := sends.acquiring("")
		ev := linEvent{Kind: "acq", Name: name, Client: id, Tok: tok, Call: us(call), Ret: us(ret)}
		switch {
		case err == nil:
			ev.Out, ev.Fence = "ok", l.Fence()
		case errors.Is(err, core.ErrNotAcquired):
			ev.Out = "busy"
		default:
			ev.Out = "unknown" // the script may have run: if so, nobody renews it and it expires
			emit(ev)
			emit(linEvent{Kind: "exp", Name: name, Client: id, Tok: tok, Call: us(call), Ret: us(ret) + slack})
			awaitRedis(ctx, rdb, end)
			continue
		}
		emit(ev)
		if err != nil {
			continue
		}
		work := mrand.N(ttl / 4)
		if mrand.N(6) == 0 {
			work = mrand.N(2 * ttl) // long enough to need renewals, and to be lost in a fault
		}
		select { // work under the lock
		case <-time.After(work):
		case <-l.Context().Done():
		}
		rcall := time.Now()
		rerr := l.Release(context.Background())
		rret := time.Now()
		// The lock cannot leave Redis before TTL after the last script that set its expiry was sent.
		earliest := us(sends.renewedAt(l.Context(), acqSent).Add(ttl))
		exp := linEvent{Kind: "exp", Name: name, Client: id, Tok: tok, Call: earliest, Live: us(rcall)}
		at, expired, lost := sends.lostAt(l.Context())
		if le := (*core.LostError)(nil); !lost && errors.As(context.Cause(l.Context()), &le) {
			// Lost, and the Lost hook, which runs right after the context's cancellation (and before
			// the hold is given back), has not run yet: Release answered ErrNotHeld from the hold's
			// state, before anything of the hold was given back.
			at, expired, lost = rcall, le.Reason == "expired", true
		}
		if lost {
			// Lost before Release: the lock left Redis after earliest, and within slack of the loss.
			exp.Out, exp.Live, exp.Ret = "lost", us(at), us(at)+slack
			if expired { // (or from the report on: the give-back)
				exp.GiveBack = us(at)
			}
			emit(exp)
			continue
		}
		rel := linEvent{Kind: "rel", Name: name, Client: id, Tok: tok, Call: us(rcall), Ret: us(rret)}
		switch {
		case rerr == nil:
			rel.Out = "ok"
		case errors.Is(rerr, core.ErrNotHeld):
			// Redis said the token did not hold the lock: it expired before the release reached
			// Redis (a stalled network or Redis).
			rel.Out, exp.Out, exp.Ret = "notheld", "notheld", us(rret)
			emit(exp)
		default:
			rel.Out, exp.Ret = "unknown", us(rret)+slack
			emit(exp)
		}
		emit(rel)
	}
	return nil
}

// sendLog records, for one client, when the scripts that set a lock's expiry were sent: the
// acquisition's (a go-redis hook sees the token go out) and each successful renewal's (core's
// Renewed hook); and when losses were reported. Locks are told apart by their contexts.
type sendLog struct {
	mu      sync.Mutex
	tok     string    // the token being acquired, "" between acquisitions
	sent    time.Time // when the last script carrying tok was sent
	renewed map[context.Context]time.Time
	lost    map[context.Context]loss
}

// loss is when a lock's loss was reported, and whether it was declared expired.
type loss struct {
	at      time.Time
	expired bool
}

// acquiring starts recording the scripts that carry tok ("": stops) and returns when the last
// script of the previous token was sent: for a successful Acquire, the attempt that took the lock.
func (s *sendLog) acquiring(tok string) (sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sent = s.sent
	s.tok, s.sent = tok, time.Time{}
	return sent
}

func (s *sendLog) renewedAt(lockCtx context.Context, acquired time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.renewed[lockCtx]; r.After(acquired) {
		return r
	}
	return acquired
}

func (s *sendLog) lostAt(lockCtx context.Context) (at time.Time, expired, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.lost[lockCtx]
	return l.at, l.expired, ok
}

func (s *sendLog) hook() core.Hook {
	return core.Hook{
		Renewed: func(lockCtx context.Context, info core.HoldInfo) {
			s.mu.Lock()
			if info.Renewed && info.Start.After(s.renewed[lockCtx]) {
				s.renewed[lockCtx] = info.Start
			}
			s.mu.Unlock()
		},
		Lost: func(lockCtx context.Context, info core.HoldInfo) {
			var le *core.LostError
			expired := errors.As(info.Err, &le) && le.Reason == "expired"
			s.mu.Lock()
			s.lost[lockCtx] = loss{at: time.Now(), expired: expired}
			s.mu.Unlock()
		},
	}
}

// DialHook implements redis.Hook.
func (s *sendLog) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook: it notes when a script carrying the token being acquired was
// sent.
func (s *sendLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		t0 := time.Now()
		err := next(ctx, cmd)
		s.note(t0, cmd)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook: as ProcessHook, for an acquisition that travelled in
// a pipeline (coalesced with other calls). Renewals travel in pipelines too; Renewed reports them.
func (s *sendLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		t0 := time.Now()
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			s.note(t0, cmd)
		}
		return err
	}
}

// note records t0 as the send time of cmd if it is a script carrying the token being acquired.
func (s *sendLog) note(t0 time.Time, cmd redis.Cmder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != "" && strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") && slices.Contains(cmd.Args(), any(s.tok)) {
		s.sent = t0
	}
}

// awaitRedis backs off until Redis answers a PING (or end), without recording anything: a client
// that retried at once would, against a connection that resets, add an operation of unknown outcome
// every few milliseconds, each with a window of several TTLs in which its lock may expire; enough
// of those overlapping make porcupine's search exponential.
func awaitRedis(ctx context.Context, rdb *redis.Client, end time.Time) {
	for time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			return
		}
	}
}

// parseLinEvent parses a child's "op {...}" line.
func parseLinEvent(line string) (linEvent, bool) {
	var ev linEvent
	js, ok := strings.CutPrefix(line, "op ")
	if !ok || json.Unmarshal([]byte(js), &ev) != nil {
		return ev, false
	}
	return ev, true
}

// parseLate parses a child's last line, "late <ns>": how late its timers ran at worst.
func parseLate(line string) (time.Duration, bool) {
	var d int64
	if _, err := fmt.Sscanf(line, "late %d", &d); err != nil || !strings.HasPrefix(line, "late ") {
		return 0, false
	}
	return time.Duration(d), true
}
