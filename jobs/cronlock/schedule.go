package cronlock

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Every returns a schedule that activates every d at whole multiples of d since the Unix epoch
// (1970-01-01 00:00:00 UTC), so replicas started at different moments agree on every activation.
// Like cron.Every, d is truncated to whole seconds and at least one second. Add uses it in place of
// the start-relative cron.ConstantDelaySchedule that "@every" specs produce. Intervals that do not
// divide a day are aligned to the epoch, not restarted every midnight.
func Every(d time.Duration) cron.Schedule {
	if d < time.Second {
		d = time.Second
	}
	return every(d / time.Second)
}

// every is an epoch-aligned interval in whole seconds.
type every int64

// Next returns the first multiple of the interval (since the epoch) after t.
func (e every) Next(t time.Time) time.Time {
	s, d := t.Unix(), int64(e)
	r := s % d
	if r < 0 {
		r += d
	}
	return time.Unix(s-r+d, 0).In(t.Location())
}

// specParser accepts the standard five fields, an optional leading seconds field (the form of
// cron.WithSeconds) and descriptors such as "@hourly" and "@every 10s".
var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month |
	cron.Dow | cron.Descriptor)

// parseSpec parses a cron spec and aligns "@every" schedules to the epoch. robfig/cron's parser
// panics on some malformed specs (e.g. "TZ=UTC" without a space); that is reported as an error.
func parseSpec(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("malformed spec: %v", r)
		}
	}()
	s, err = specParser.Parse(spec)
	if err != nil {
		return nil, err
	}
	return align(s), nil
}

// align replaces a start-relative constant delay by the epoch-aligned interval of the same length.
func align(s cron.Schedule) cron.Schedule {
	switch c := s.(type) {
	case cron.ConstantDelaySchedule:
		return Every(c.Delay)
	case *cron.ConstantDelaySchedule:
		return Every(c.Delay)
	}
	return s
}

// maxLookback bounds the search for the previous activation; robfig/cron's SpecSchedule gives up
// looking for the next one after five years too.
const maxLookback = 5 * 366 * 24 * time.Hour

// nearest returns the activation of s nearest to now, or the zero time if s has none. It is the tick
// a replica fires for when its timer is late, or its clock differs from the one that armed the timer,
// by less than half the gap between two activations: on a one-second schedule a replica whose clock
// reads 300 ms early or late still names the right tick, on a minute schedule 29 s.
func nearest(s cron.Schedule, now time.Time) time.Time {
	next := s.Next(now)
	prev := previous(s, now, next)
	switch {
	case prev.IsZero():
		return next
	case next.IsZero(), now.Sub(prev) <= next.Sub(now):
		return prev
	}
	return next
}

// previous returns the latest activation of s at or before now, given next = s.Next(now), or the zero
// time if there is none within maxLookback. It looks back by the gap after next, doubling the distance
// until an activation turns up, then bisects: a few Next calls in the common case, about 60 at worst.
func previous(s cron.Schedule, now, next time.Time) time.Time {
	step := time.Second
	if !next.IsZero() {
		if g := s.Next(next).Sub(next); g > step {
			step = g
		}
	}
	after := func(t time.Time) bool { // no activation in (t, now]
		n := s.Next(t)
		return n.IsZero() || n.After(now)
	}
	hi := now // invariant: after(hi)
	for back := step; back <= maxLookback; back *= 2 {
		lo := now.Add(-back)
		t := s.Next(lo)
		if t.IsZero() || t.After(now) {
			hi = lo
			continue
		}
		if after(t) { // t is the only activation in (lo, now]: the common case
			return t
		}
		for hi.Sub(lo) > time.Nanosecond { // invariant: !after(lo) && after(hi)
			mid := lo.Add(hi.Sub(lo) / 2)
			if after(mid) {
				hi = mid
			} else {
				lo = mid
			}
		}
		return hi // s.Next(lo) is in (lo, now] but not in (hi, now], and hi = lo+1ns
	}
	return time.Time{}
}

// markerTTL is how long the completion marker of tick stays: until one gap after the next tick, so
// that no replica firing late or with a skewed clock (by less than half a gap) can find the tick
// unmarked. It is at least a second.
func markerTTL(s cron.Schedule, tick, now time.Time) time.Duration {
	return max(tick.Add(2*period(s, tick)).Sub(now), time.Second)
}

// period is the time from tick to the schedule's next activation (a minute after the last one).
func period(s cron.Schedule, tick time.Time) time.Duration {
	if n := s.Next(tick); !n.IsZero() {
		return n.Sub(tick)
	}
	return time.Minute // a last activation: no next one to measure by
}

// maxHold is the WithMaxHold of a run for tick: the option's, or the larger of the period and ttl.
func maxHold(opt, ttl time.Duration, s cron.Schedule, tick time.Time) time.Duration {
	if opt >= 0 {
		return opt
	}
	return max(period(s, tick), ttl)
}
