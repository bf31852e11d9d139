package chaos_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/core"
)

// The safety checker's history: what the workload did (holds, failed acquisitions, Do calls), what
// the fault injector did (fault spans), and what the clients' connections saw (slow or failed
// commands). Every time is a duration since the run's start on the process's monotonic clock: all
// clients live in the test process, so one clock orders everything.

// hold is one successful Acquire, TryAcquire or Do acquisition (fresh or re-entry), and what became
// of the lock's context.
type hold struct {
	ID     int    `json:"id"`
	Client int    `json:"client"` // the client slot; Gen counts its replacements
	Gen    int    `json:"gen"`
	Name   string `json:"name"`
	Tok    string `json:"tok"`
	Kind   string `json:"kind"` // acquire, try, do, ctx (re-entry through a lock's context), owner (WithOwner), token (WithToken: re-entry or fresh), giveup
	Fair   bool   `json:"fair,omitempty"`
	Limit  int    `json:"limit,omitempty"` // a permit's (Permits); 0 for a lock
	// Mode is the kind of hold in the mixed variant (lock, write, read, permit); "" elsewhere.
	Mode  string        `json:"mode,omitempty"`
	TTL   time.Duration `json:"ttl"`
	Call  time.Duration `json:"call"`
	Sent  time.Duration `json:"sent"` // no later than the send of the attempt that took the lock
	Ret   time.Duration `json:"ret"`
	Fence int64         `json:"fence"`
	Holds int64         `json:"holds"`
	Outer int           `json:"outer,omitempty"` // ctx and owner: the hold re-entered (its ID)
	// Live is the last moment the lock's context was seen live (0: never seen live after Ret).
	Live time.Duration `json:"live"`
	// End is when the context's cancellation was observed (an upper bound), Cause its cause.
	End   time.Duration `json:"end,omitempty"`
	Cause string        `json:"cause,omitempty"`
	// LostAt is when core's Lost hook ran (after the context was cancelled, before the hold was
	// given back), Why its reason.
	LostAt time.Duration `json:"lost_at,omitempty"`
	Why    string        `json:"why,omitempty"`
	// Renewed is the send time of the last successful renewal; Extends lists the Extend calls.
	Renewed time.Duration `json:"renewed,omitempty"`
	// Tried is the send time of the last renewal, answered or not, and TryErr its error.
	Tried   time.Duration `json:"tried,omitempty"`
	TryErr  string        `json:"try_err,omitempty"`
	Extends []extend      `json:"extends,omitempty"`
	// DoErr is Do's error ("" for nil), DoLive whether fn ended with the context live, DoRet when
	// Do returned.
	DoErr  string        `json:"do_err,omitempty"`
	DoLive bool          `json:"do_live,omitempty"`
	DoRet  time.Duration `json:"do_ret,omitempty"`
	// MaxHold is the hold's own WithMaxHold limit (or its Client's WithDefaultMaxHold; 0: none).
	// After a hold ended by its limit the worker reads Redis directly: HeldSeen is the last time
	// its token still held the lock (or its permit) there, Freed the first time it no longer did.
	MaxHold  time.Duration `json:"max_hold,omitempty"`
	HeldSeen time.Duration `json:"held_seen,omitempty"`
	Freed    time.Duration `json:"freed,omitempty"`
	// Queue is a fair hold's queue timeout (its Client's WithFairWaiterTimeout): a grant's first
	// lease is at most this long.
	Queue time.Duration `json:"queue,omitempty"`
}

type extend struct {
	TTL time.Duration `json:"ttl"`
	At  time.Duration `json:"at"`
	OK  bool          `json:"ok"`
}

// failed is an acquisition of a fresh token that returned an error: its script may have run. Seen
// tells on how many nodes, Checked after it returned, Redis still had the token as the lock's owner.
type failed struct {
	Client  int           `json:"client"`
	Name    string        `json:"name"`
	Tok     string        `json:"tok"`
	TTL     time.Duration `json:"ttl"`
	Limit   int           `json:"limit,omitempty"` // a permit's (Permits); 0 for a lock
	Call    time.Duration `json:"call"`
	Ret     time.Duration `json:"ret"`
	Err     string        `json:"err"`
	Checked time.Duration `json:"checked,omitempty"`
	Seen    int           `json:"seen,omitempty"`
}

// span is a time interval on a path: a fault, or a command that failed or was slow. Target is a
// client slot, or -1 - i for Redis node i (a paused node hits every client).
type span struct {
	Kind   string        `json:"kind"`
	Target int           `json:"target"`
	From   time.Duration `json:"from"`
	To     time.Duration `json:"to"`
	Detail string        `json:"detail,omitempty"`
	// A key loss (see lossKinds): the name whose keys it deleted ("" for every name), which of
	// them (Keys: "lock", "permits", "rw", "fence"; "" for all) and whether it may not have run
	// (Unsure: the command failed, so it may or may not have reached Redis).
	Name   string `json:"name,omitempty"`
	Keys   string `json:"keys,omitempty"`
	Unsure bool   `json:"unsure,omitempty"`
}

// history is the record of one run; its methods are safe for concurrent use.
type history struct {
	start time.Time
	mu    sync.Mutex
	calls []*call // the successful ones, in the order they returned
	fails []*failed
	open  atomic.Int64 // lock contexts not yet seen cancelled
	// faults are injected faults, slow the clients' slow or failed commands, late the probe's
	// timer lateness per interval (Detail empty; Target the lateness in µs; From-To the interval,
	// from its start less that lateness: see addLate).
	faults, slow, late []span
	renewing           map[string]int           // renewals in flight, by token
	active             map[int]string           // the fault on each client slot's path now
	noTTL              map[string]time.Duration // keys seen without a TTL, and when first
	panics             []span
	permits            []permitSnap // the semaphore scenario's reads of the permits in Redis
	ops                int
	counts             map[string]int  // the new operations' tallies, by kind (see count)
	sched              []span          // the scheduler's worst sampled goroutine wait per interval, as late
	releaseErr         map[string]bool // tokens a release (a give-back, say) was sent for that failed
}

func newHistory() *history {
	return &history{start: time.Now(), noTTL: map[string]time.Duration{}, renewing: map[string]int{}, active: map[int]string{},
		counts: map[string]int{}, releaseErr: map[string]bool{}}
}

// count tallies one operation (or outcome) of kind for the report.
func (h *history) count(kind string) { h.mu.Lock(); h.counts[kind]++; h.mu.Unlock() }

// faulted returns the kind of the fault on slot's path now ("" if none). The workload uses it to
// provoke the races a fault opens (an Extend during delayed replies, a caller that gives up).
func (h *history) faulted(slot int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.active[slot]
}

// holding returns the client slots that hold a lock with a TTL of at least ttl now.
func (h *history) holding(ttl time.Duration) []int {
	h.mu.Lock()
	calls := slices.Clone(h.calls)
	h.mu.Unlock()
	var slots []int
	for _, c := range calls {
		c.mu.Lock()
		if c.hold.End == 0 && c.hold.TTL >= ttl && !slices.Contains(slots, c.hold.Client) {
			slots = append(slots, c.hold.Client)
		}
		c.mu.Unlock()
	}
	slices.Sort(slots)
	return slots
}

// claim marks slot's proxies as carrying a fault of kind, unless they carry one already: toxics are
// never stacked on a path (toxiproxy can block for good when it removes several from a busy link).
// unclaim (kind "") heals it.
func (h *history) claim(slot int, kind string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if kind != "" && h.active[slot] != "" {
		return false
	}
	h.active[slot] = kind
	return true
}

// inFlight reports whether a renewal of tok is in flight.
func (h *history) inFlight(tok string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewing[tok] > 0
}

func (h *history) now() time.Duration { return time.Since(h.start) }

func (h *history) op() { h.mu.Lock(); h.ops++; h.mu.Unlock() }

func (h *history) addFault(s span) { h.mu.Lock(); h.faults = append(h.faults, s); h.mu.Unlock() }

// addLate records the probe's worst lateness late in the interval [from, to] in which it was
// measured. The late wake-up ended in that interval but the stall began late earlier, maybe in
// the interval before (a whole process stopped for 240 ms was measured by the probe only after the
// watcher's next tick, which the stall had delayed too): the span starts late before from.
func (h *history) addLate(from, to, late time.Duration) {
	h.mu.Lock()
	h.late = append(h.late, span{From: from - late, To: to, Target: int(late / time.Microsecond)})
	h.mu.Unlock()
}

// addSched records the scheduler's worst sampled wait, as addLate.
func (h *history) addSched(from, to, late time.Duration) {
	h.mu.Lock()
	h.sched = append(h.sched, span{From: from - late, To: to, Target: int(late / time.Microsecond)})
	h.mu.Unlock()
}

// panicked records a panic once per message.
func (h *history) panicked(what string) {
	at := h.now()
	h.mu.Lock()
	if !slices.ContainsFunc(h.panics, func(s span) bool { return s.Detail == what }) {
		h.panics = append(h.panics, span{Kind: "panic", From: at, To: at, Detail: what})
	}
	h.mu.Unlock()
}

// call is the record of one acquire call in flight, carried by the context it is made with, so
// that core's hooks and the go-redis hook find it.
type call struct {
	h       *history
	hold    *hold
	set     *call      // a set's member: the set's call (safety_sets_test.go)
	members setMembers // a set's call: its members, by name
	mu      sync.Mutex
	lock    *core.Lock    // a set's member: its lock, as core's Acquired hook handed it
	tok     string        // the token its acquire scripts carried
	attempt time.Duration // when the latest attempt ended (the call's start before the first)
	prev    time.Duration // when the attempt before it ended: the latest attempt was sent after
}

type callKey struct{}

// newCall returns ctx carrying a new call record.
func (h *history) newCall(ctx context.Context, hd *hold) (context.Context, *call) {
	c := &call{h: h, hold: hd}
	h.op()
	hd.Call = h.now()
	c.attempt, c.prev = hd.Call, hd.Call
	return context.WithValue(ctx, callKey{}, c), c
}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// acquired completes the hold record of a successful call and watches the lock's context.
func (c *call) acquired(l *core.Lock) {
	h := c.h
	c.mu.Lock()
	hd := c.hold
	hd.Ret = h.now()
	hd.Sent = c.prev
	hd.Fence, hd.Holds, hd.Tok = l.Fence(), l.Holds(), l.Token()
	c.mu.Unlock()
	c.live(l.Context())
	h.mu.Lock()
	hd.ID = len(h.calls) + 1
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	lctx := l.Context()
	h.open.Add(1)
	context.AfterFunc(lctx, func() {
		defer h.open.Add(-1)
		at := h.now()
		cause := context.Cause(lctx)
		c.mu.Lock()
		c.hold.End, c.hold.Cause = at, causeName(cause)
		c.mu.Unlock()
	})
}

// live notes that the lock's context is live now, if it is.
func (c *call) live(lctx context.Context) {
	at := c.h.now() // taken before the check: the context was live at least until then
	if lctx.Err() != nil {
		return
	}
	c.mu.Lock()
	c.hold.Live = max(c.hold.Live, at)
	c.mu.Unlock()
}

// snapshot returns copies of the holds, by ID.
func (h *history) snapshot() []hold {
	h.mu.Lock()
	calls := h.calls
	h.mu.Unlock()
	out := make([]hold, len(calls))
	for i, c := range calls {
		c.mu.Lock()
		out[i] = *c.hold
		out[i].Extends = slices.Clone(c.hold.Extends)
		c.mu.Unlock()
	}
	return out
}

// result returns the run for the oracle.
func (h *history) result(redlock bool) run {
	holds := h.snapshot()
	h.mu.Lock()
	defer h.mu.Unlock()
	r := run{holds: holds, faults: slices.Clone(h.faults), slow: slices.Clone(h.slow), late: slices.Clone(h.late),
		noTTL: maps.Clone(h.noTTL), panics: slices.Clone(h.panics), permits: slices.Clone(h.permits), redlock: redlock,
		sched: slices.Clone(h.sched), releaseErr: maps.Clone(h.releaseErr)}
	for _, f := range h.fails {
		r.fails = append(r.fails, *f)
	}
	return r
}

func causeName(err error) string {
	var le *core.LostError
	switch {
	case errors.Is(err, core.ErrMaxHold):
		return "maxhold"
	case errors.As(err, &le):
		return "lost:" + le.Reason
	case errors.Is(err, core.ErrReleased):
		return "released"
	case errors.Is(err, core.ErrClosed):
		return "closed"
	case err == nil:
		return ""
	}
	return "other:" + err.Error()
}
