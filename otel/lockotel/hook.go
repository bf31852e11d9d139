package lockotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockkit/lockkit/core"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span and event names.
const (
	spanWait     = "lock.wait"
	spanHold     = "lock.hold"
	spanRenew    = "lock.renew"
	eventAttempt = "lock.attempt"
	eventRenew   = "lock.renew"
)

// Attribute keys. There is no OpenTelemetry convention for locks, so they live under lockkit.lock.
const (
	attrName         = attribute.Key("lockkit.lock.name")
	attrKey          = attribute.Key("lockkit.lock.key")
	attrTTL          = attribute.Key("lockkit.lock.ttl") // seconds
	attrFence        = attribute.Key("lockkit.lock.fence")
	attrReentrant    = attribute.Key("lockkit.lock.reentrant")
	attrHolds        = attribute.Key("lockkit.lock.holds")
	attrOutcome      = attribute.Key("lockkit.lock.outcome")
	attrAttempts     = attribute.Key("lockkit.lock.attempts")
	attrAttempt      = attribute.Key("lockkit.lock.attempt")
	attrWoken        = attribute.Key("lockkit.lock.woken")
	attrAcquired     = attribute.Key("lockkit.lock.acquired")
	attrRetryAfter   = attribute.Key("lockkit.lock.retry_after") // seconds
	attrHoldOutcome  = attribute.Key("lockkit.lock.hold.outcome")
	attrLostReason   = attribute.Key("lockkit.lock.lost.reason")
	attrRenewOutcome = attribute.Key("lockkit.lock.renew.outcome")
	attrRenewLatency = attribute.Key("lockkit.lock.renew.latency") // seconds, on renewal events
	attrErrorType    = attribute.Key("error.type")                 // the semantic convention's key
	attrPermits      = attribute.Key("lockkit.lock.permits")       // a semaphore's limit (core.Permits)
	attrMode         = attribute.Key("lockkit.lock.mode")          // read or write (core.Read, core.Write)
)

// Attribute values besides core.WaitInfo.Outcome's.
const (
	outcomeAcquired = "acquired"
	outcomeError    = "error"
	holdReleased    = "released"
	holdLost        = "lost"
	holdError       = "error"
	renewRenewed    = "renewed"
	renewError      = "error"
	renewNotOwner   = "not_owner"
	reasonNotOwner  = "not_owner"
)

type hook struct {
	opt       options
	tracer    trace.Tracer
	startOpts []trace.SpanStartOption // SpanKindInternal
	m         instruments
	// attrs recycles attribute slices: SetAttributes copies them, and a span's attributes are
	// set in one call, so one slice serves a call at a time.
	attrs sync.Pool
}

// putAttrs recycles the slice of attrs, cleared so that it keeps no strings alive.
func (h *hook) putAttrs(buf *[]attribute.KeyValue, attrs []attribute.KeyValue) {
	clear(attrs)
	*buf = attrs[:0]
	h.attrs.Put(buf)
}

// waitKey and holdKey find a hook's state in a context; they carry the hook so that two installed
// hooks never see each other's state.
type waitKey struct{ h *hook }
type holdKey struct{ h *hook }

// waitCtx is the context WaitStart returns: the caller's context with the lock.wait span. It keeps
// the caller's context, whose span is the parent of the lock.hold span to come.
type waitCtx struct {
	context.Context
	h      *hook
	caller context.Context
	span   trace.Span
	hold   *holdState // allocated with the waitCtx, for Acquired
}

// lockState puts the states of one acquire call in one allocation.
type lockState struct {
	wait waitCtx
	hold holdState
}

func (c *waitCtx) Value(key any) any {
	if k, ok := key.(waitKey); ok && k.h == c.h {
		return c
	}
	return c.Context.Value(key)
}

// holdState is the context Acquired returns, carrying the lock.hold span: the parent of the lock's
// context. Everything else about the hold (its name, fence, holds, whether it re-entered, which event
// ends it and whether that counts a loss) comes from core's HoldInfo.
type holdState struct {
	context.Context
	h     *hook
	span  trace.Span
	l     *core.Lock
	ttl   time.Duration
	start time.Time
}

func (s *holdState) Value(key any) any {
	if k, ok := key.(holdKey); ok && k.h == s.h {
		return s
	}
	return s.Context.Value(key)
}

// waitFrom returns the state of the acquire call ctx belongs to; nil after Acquired, when a lock's
// context (derived from it) might be used for another call that carries no state of its own.
func (h *hook) waitFrom(ctx context.Context) *waitCtx {
	w, _ := ctx.Value(waitKey{h}).(*waitCtx)
	if w == nil || w.span == nil {
		return nil
	}
	return w
}

func (h *hook) holdFrom(ctx context.Context) *holdState {
	s, _ := ctx.Value(holdKey{h}).(*holdState)
	return s
}

// Spans get their attributes in one call when they end (they are exported only then): with the
// SDK, one SetAttributes costs one allocation where attributes at start and at end cost four.

func (h *hook) waitStart(ctx context.Context, _ core.WaitInfo) context.Context {
	sctx, span := h.tracer.Start(ctx, spanWait, h.startOpts...)
	if !span.IsRecording() && span.SpanContext().Equal(trace.SpanContextFromContext(ctx)) {
		return nil // a no-op tracer passing the caller's span through: nothing to carry
	}
	st := &lockState{wait: waitCtx{Context: sctx, h: h, caller: ctx, span: span}}
	st.wait.hold = &st.hold
	return &st.wait
}

func (h *hook) attempt(ctx context.Context, info core.WaitInfo) {
	if info.Attempts == 1 && info.Acquired {
		return // acquired at once: lockkit.lock.attempts=1 says it all
	}
	w := h.waitFrom(ctx)
	if w == nil || !w.span.IsRecording() {
		return
	}
	w.span.AddEvent(eventAttempt, trace.WithAttributes(
		attrAttempt.Int(info.Attempts),
		attrWoken.Bool(info.Woken),
		attrAcquired.Bool(info.Acquired),
		attrRetryAfter.Float64(info.RetryAfter.Seconds()),
	))
}

func (h *hook) waitDone(ctx context.Context, info core.WaitInfo) {
	m := h.with(attrOutcome.String(info.Outcome), info.Name)
	h.m.waitDur.Record(ctx, info.Duration.Seconds(), m.rec...)
	h.m.acquires.Add(ctx, 1, m.add...)
	w := h.waitFrom(ctx)
	if w == nil {
		return
	}
	if w.span.IsRecording() {
		buf := h.attrs.Get().(*[]attribute.KeyValue)
		attrs := append((*buf)[:0], attrName.String(info.Name), attrOutcome.String(info.Outcome))
		if info.Attempts != 1 { // left out when 1 (the uncontended case), to spare the SDK's time
			attrs = append(attrs, attrAttempts.Int(info.Attempts))
		}
		if info.Limit > 0 {
			attrs = append(attrs, attrPermits.Int(info.Limit))
		}
		if info.Mode != "" {
			attrs = append(attrs, attrMode.String(info.Mode))
		}
		if h.opt.key {
			attrs = append(attrs, attrKey.String(info.Key))
		}
		// Contention, timeouts and cancellation are outcomes of a wait, not failures.
		failed := info.Outcome == outcomeError && info.Err != nil
		if failed {
			attrs = append(attrs, attrErrorType.String(errorType(info.Err)))
		}
		w.span.SetAttributes(attrs...)
		h.putAttrs(buf, attrs)
		if failed {
			w.span.SetStatus(codes.Error, info.Err.Error())
		}
	}
	w.span.End()
}

func (h *hook) acquired(ctx context.Context, info core.HoldInfo) context.Context {
	w := h.waitFrom(ctx)
	var s *holdState
	if w != nil && w.hold != nil {
		s, w.hold = w.hold, nil
	} else {
		s = new(holdState)
	}
	s.h, s.l, s.ttl, s.start = h, info.Lock, info.TTL, time.Now()
	// The hold is a child of the caller's span, not of lock.wait (which has ended): the two are
	// siblings, linked.
	parent := ctx
	if w != nil {
		if ctx == context.Context(w) {
			parent = w.caller // no other hook wrapped the context: start over from the caller's
		} else {
			parent = trace.ContextWithSpan(ctx, trace.SpanFromContext(w.caller))
		}
	}
	s.Context, s.span = h.tracer.Start(parent, spanHold, h.startOpts...)
	if w != nil {
		if sc := w.span.SpanContext(); sc.IsValid() && s.span.IsRecording() {
			s.span.AddLink(trace.Link{SpanContext: sc})
		}
		w.span = nil // the wait is over: waitFrom ignores w from now on, and the ended span is freed
	}
	if info.Held != 0 {
		h.heldDelta(s.Context, s.l.Name(), int64(info.Held))
	}
	return s
}

func (h *hook) renewed(ctx context.Context, info core.HoldInfo) {
	s := h.holdFrom(ctx)
	if s == nil {
		return
	}
	outcome := renewRenewed
	switch {
	case info.Err != nil:
		outcome = renewError
	case !info.Renewed:
		outcome = renewNotOwner
	}
	name := s.l.Name()
	h.m.renewals.Add(ctx, 1, h.with(attrRenewOutcome.String(outcome), name).add...)
	if h.opt.renewEvent {
		if s.span.IsRecording() {
			s.span.AddEvent(eventRenew, trace.WithTimestamp(info.Start), trace.WithAttributes(
				attrRenewOutcome.String(outcome), attrRenewLatency.Float64(info.Duration.Seconds())))
		}
		return
	}
	attrs := []attribute.KeyValue{attrName.String(name), attrTTL.Float64(info.TTL.Seconds()),
		attrRenewOutcome.String(outcome)}
	if h.opt.key {
		attrs = append(attrs, attrKey.String(s.l.Key()))
	}
	if n := s.l.Limit(); n > 0 {
		attrs = append(attrs, attrPermits.Int(n))
	}
	if m := s.l.Mode(); m != "" {
		attrs = append(attrs, attrMode.String(m))
	}
	_, span := h.tracer.Start(trace.ContextWithSpan(ctx, s.span), spanRenew,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(info.Start), trace.WithAttributes(attrs...))
	if outcome != renewRenewed && span.IsRecording() {
		msg := "lock not owned"
		if info.Err != nil {
			msg = info.Err.Error()
			span.SetAttributes(attrErrorType.String(errorType(info.Err)))
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End(trace.WithTimestamp(info.Start.Add(info.Duration)))
}

// lost ends a hold the watchdog gave up; core marks one of the lock's holds Last, where the loss is
// counted once.
func (h *hook) lost(ctx context.Context, info core.HoldInfo) {
	s := h.holdFrom(ctx)
	if s == nil {
		return
	}
	reason := "unknown"
	var le *core.LostError
	if errors.As(info.Err, &le) {
		reason = le.Reason
	}
	if info.Last {
		h.m.lost.Add(ctx, 1, h.with(attrLostReason.String(reason), s.l.Name()).add...)
	}
	if info.Held != 0 {
		h.heldDelta(ctx, s.l.Name(), int64(info.Held))
	}
	h.endHold(ctx, s, holdLost, reason, info.Err)
}

func (h *hook) released(ctx context.Context, info core.HoldInfo) {
	s := h.holdFrom(ctx)
	if s == nil {
		return
	}
	if info.Held != 0 {
		h.heldDelta(ctx, s.l.Name(), int64(info.Held))
	}
	switch {
	case info.Err == nil:
		h.endHold(ctx, s, holdReleased, "", nil)
	case errors.Is(info.Err, core.ErrNotHeld):
		// Release found the lock gone: it was lost without the watchdog noticing in time. (Core
		// reports the Client's other holds of it lost; the loss counts once, on the Last event.)
		if info.Last {
			h.m.lost.Add(ctx, 1, h.with(attrLostReason.String(reasonNotOwner), s.l.Name()).add...)
		}
		h.endHold(ctx, s, holdLost, reasonNotOwner, info.Err)
	default:
		h.endHold(ctx, s, holdError, "", info.Err)
	}
}

// endHold records the hold's duration and ends its span.
func (h *hook) endHold(ctx context.Context, s *holdState, outcome, reason string, err error) {
	name := s.l.Name()
	h.m.holdDur.Record(ctx, time.Since(s.start).Seconds(), h.with(attrHoldOutcome.String(outcome), name).rec...)
	if s.span.IsRecording() {
		buf := h.attrs.Get().(*[]attribute.KeyValue)
		// Default values are left out to spare the SDK's time: no reentrant/holds on a fresh hold.
		attrs := append((*buf)[:0], attrName.String(name), attrFence.Int64(s.l.Fence()),
			attrTTL.Float64(s.ttl.Seconds()), attrHoldOutcome.String(outcome))
		if s.l.Holds() > 1 {
			attrs = append(attrs, attrReentrant.Bool(true), attrHolds.Int64(s.l.Holds()))
		}
		if n := s.l.Limit(); n > 0 {
			attrs = append(attrs, attrPermits.Int(n))
		}
		if m := s.l.Mode(); m != "" {
			attrs = append(attrs, attrMode.String(m))
		}
		if h.opt.key {
			attrs = append(attrs, attrKey.String(s.l.Key()))
		}
		if reason != "" {
			attrs = append(attrs, attrLostReason.String(reason))
		}
		if err != nil {
			attrs = append(attrs, attrErrorType.String(errorType(err)))
		}
		s.span.SetAttributes(attrs...)
		h.putAttrs(buf, attrs)
		if err != nil {
			s.span.SetStatus(codes.Error, err.Error())
		}
	}
	s.span.End()
}

// errorType returns the error's ErrorType (lockkit errors have one), or "_OTHER".
func errorType(err error) string {
	var t interface{ ErrorType() string }
	if errors.As(err, &t) {
		return t.ErrorType()
	}
	return "_OTHER"
}
