package lockotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Metric names. Durations are histograms in seconds; the others count events or locks.
const (
	metricWaitDuration = "lockkit.lock.wait.duration"
	metricHoldDuration = "lockkit.lock.hold.duration"
	metricAcquisitions = "lockkit.lock.acquisitions"
	metricRenewals     = "lockkit.lock.renewals"
	metricLost         = "lockkit.lock.lost"
	metricHeld         = "lockkit.lock.held"
)

// instruments are the hook's metric instruments and the attribute sets they are recorded with.
type instruments struct {
	waitDur, holdDur         metric.Float64Histogram
	acquires, renewals, lost metric.Int64Counter
	held                     metric.Int64UpDownCounter
	// presets are ready-made measurement options per attribute value, for metrics without a lock
	// name: recording then allocates nothing.
	presets []preset
}

// durationBuckets are the explicit histogram bucket boundaries, in seconds: 0.5 ms to 5 minutes.
func durationBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
		60, 120, 300}
}

func (m *instruments) init(meter metric.Meter) {
	nm := noop.Meter{}
	hist := func(name, desc string) metric.Float64Histogram {
		h, e := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets()...))
		if e != nil || h == nil {
			h, _ = nm.Float64Histogram(name)
			report(e)
		}
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, e := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if e != nil || c == nil {
			c, _ = nm.Int64Counter(name)
			report(e)
		}
		return c
	}
	m.waitDur = hist(metricWaitDuration, "Time spent acquiring a lock, by outcome.")
	m.holdDur = hist(metricHoldDuration, "Time a lock was held, by how the hold ended.")
	m.acquires = counter(metricAcquisitions, "{acquisition}", "Acquire, TryAcquire and Do calls, by outcome.")
	m.renewals = counter(metricRenewals, "{renewal}", "Renewals of held locks by the watchdog, by outcome.")
	m.lost = counter(metricLost, "{lock}", "Locks lost while held, by reason.")
	held, e := meter.Int64UpDownCounter(metricHeld, metric.WithUnit("{lock}"),
		metric.WithDescription("Locks currently held (re-entered holds count once)."))
	if e != nil || held == nil {
		held, _ = nm.Int64UpDownCounter(metricHeld)
		report(e)
	}
	m.held = held

	for _, kv := range []attribute.KeyValue{
		attrOutcome.String(outcomeAcquired), attrOutcome.String("contended"), attrOutcome.String("timeout"),
		attrOutcome.String("cancelled"), attrOutcome.String("guarded"), attrOutcome.String(outcomeError),
		attrHoldOutcome.String(holdReleased), attrHoldOutcome.String(holdLost), attrHoldOutcome.String(holdError),
		attrRenewOutcome.String(renewRenewed), attrRenewOutcome.String(renewError),
		attrRenewOutcome.String(renewNotOwner), attrLostReason.String("expired"),
		attrLostReason.String(reasonNotOwner),
	} {
		m.presets = append(m.presets, preset{kv.Key, kv.Value.AsString(), newMeasure(attribute.NewSet(kv))})
	}
}

// report passes an instrument-creation error to the global OpenTelemetry error handler.
func report(err error) {
	if err != nil {
		otel.Handle(err)
	}
}

// preset is the measure of one attribute.
type preset struct {
	k attribute.Key
	v string
	m measure
}

// measure holds the options that record a measurement with one attribute set.
type measure struct {
	rec []metric.RecordOption
	add []metric.AddOption
}

func newMeasure(s attribute.Set) measure {
	o := metric.WithAttributeSet(s)
	return measure{rec: []metric.RecordOption{o}, add: []metric.AddOption{o}}
}

// with returns the measurement options for kv, plus the lock name with WithNameOnMetrics.
func (h *hook) with(kv attribute.KeyValue, name string) measure {
	if h.opt.metricName != nil {
		if n := h.opt.metricName(name); n != "" {
			return newMeasure(attribute.NewSet(kv, attrName.String(n)))
		}
	}
	v := kv.Value.AsString()
	for i := range h.m.presets {
		if p := &h.m.presets[i]; p.v == v && p.k == kv.Key {
			return p.m
		}
	}
	return newMeasure(attribute.NewSet(kv))
}

// heldDelta adds d to the held-locks counter.
func (h *hook) heldDelta(ctx context.Context, name string, d int64) {
	if h.opt.metricName != nil {
		if n := h.opt.metricName(name); n != "" {
			h.m.held.Add(ctx, d, metric.WithAttributeSet(attribute.NewSet(attrName.String(n))))
			return
		}
	}
	h.m.held.Add(ctx, d)
}
