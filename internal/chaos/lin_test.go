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
	Out    string `json:"o"` // acq: ok, busy, unknown; rel: ok, notheld, unknown; exp: ""
	Fence  int64  `json:"f,omitempty"`
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
	// MaxRetries -1: a go-redis retry re-runs a script whose reply was lost, which core does not
	// survive today (see retry_test.go); the history would then show that known bug.
	rdb := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1})
	defer rdb.Close()
	var lostMu sync.Mutex
	lost := map[int64]time.Time{}
	c, err := core.New(rdb, core.WithHook(core.Hook{Lost: func(_ context.Context, info core.HookInfo) {
		lostMu.Lock()
		lost[info.Fence] = time.Now()
		lostMu.Unlock()
	}}))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	lostAt := func(f int64) (time.Time, bool) {
		lostMu.Lock()
		defer lostMu.Unlock()
		t, ok := lost[f]
		return t, ok
	}
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
		l, err := c.Acquire(ctx, name, ttl, core.WithOwner(tok), core.WithWait(ttl/2+mrand.N(ttl)))
		ret := time.Now()
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
			time.Sleep(50 * time.Millisecond) // back off while Redis is unreachable
			continue
		}
		emit(ev)
		if err != nil {
			continue
		}
		select { // work under the lock
		case <-time.After(mrand.N(ttl / 4)):
		case <-l.Context().Done():
		}
		rcall := time.Now()
		rerr := l.Release(context.Background())
		rret := time.Now()
		if at, ok := lostAt(l.Fence()); ok {
			// Lost before Release: the lock left Redis after `at`, within TTL.
			emit(linEvent{Kind: "exp", Name: name, Client: id, Tok: tok, Call: us(at), Ret: us(at) + slack, Out: "lost"})
			continue
		}
		rel := linEvent{Kind: "rel", Name: name, Client: id, Tok: tok, Call: us(rcall), Ret: us(rret)}
		switch {
		case rerr == nil:
			rel.Out = "ok"
		case errors.Is(rerr, core.ErrNotHeld):
			// Redis said the token did not hold the lock: it expired after Release stopped renewing
			// it and before the release reached Redis (a stalled network or Redis). Had it expired
			// earlier, while its holder believed it held it, another acquisition before rcall
			// would make the history illegal.
			rel.Out = "notheld"
			emit(linEvent{Kind: "exp", Name: name, Client: id, Tok: tok, Call: us(rcall), Ret: us(rret)})
		default:
			rel.Out = "unknown"
			emit(linEvent{Kind: "exp", Name: name, Client: id, Tok: tok, Call: us(rcall), Ret: us(rret) + slack})
		}
		emit(rel)
	}
	return nil
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
