package cronlock

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func TestEvery_alignedToEpoch(t *testing.T) {
	cases := []struct {
		d         time.Duration
		now, want int64 // Unix seconds
		nanos     int
	}{
		{10 * time.Second, 1_700_000_003, 1_700_000_010, 0},
		{10 * time.Second, 1_700_000_010, 1_700_000_020, 0}, // strictly after
		{10 * time.Second, 1_700_000_009, 1_700_000_010, 999_999_999},
		{500 * time.Millisecond, 1_700_000_000, 1_700_000_001, 500}, // rounded up to 1s
		{1500 * time.Millisecond, 1_700_000_000, 1_700_000_001, 0},  // truncated to 1s
		{7 * time.Minute, 420*1000 + 1, 420 * 1001, 0},
		{time.Hour, -1, 0, 0},          // before the epoch
		{time.Hour, -3601, -3600, 0},   // before the epoch
		{90 * time.Second, 95, 180, 0}, // 90s multiples: 0, 90, 180
	}
	for _, c := range cases {
		got := Every(c.d).Next(time.Unix(c.now, int64(c.nanos)))
		if got.Unix() != c.want || got.Nanosecond() != 0 {
			t.Errorf("Every(%v).Next(%d.%09d) = %d.%09d, want %d", c.d, c.now, c.nanos, got.Unix(), got.Nanosecond(), c.want)
		}
	}
	// Replicas started at different moments agree, unlike cron.Every.
	a, b := time.Unix(1_700_000_001, 0), time.Unix(1_700_000_004, 0)
	if Every(5*time.Second).Next(a) != Every(5*time.Second).Next(b) {
		t.Error("epoch-aligned schedules disagree")
	}
	if cron.Every(5*time.Second).Next(a) == cron.Every(5*time.Second).Next(b) {
		t.Error("cron.Every unexpectedly aligned; the test proves nothing")
	}
	// The location is kept.
	loc := time.FixedZone("X", 3600)
	if got := Every(time.Minute).Next(time.Unix(0, 0).In(loc)); got.Location() != loc {
		t.Errorf("location %v, want %v", got.Location(), loc)
	}
}

func TestParseSpec(t *testing.T) {
	start := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	ok := []struct {
		spec string
		next time.Time
	}{
		{"* * * * * *", start.Add(time.Second)},
		{"*/15 * * * * *", time.Date(2030, 5, 6, 7, 8, 15, 0, time.UTC)},
		{"*/5 * * * *", time.Date(2030, 5, 6, 7, 10, 0, 0, time.UTC)},
		{"@hourly", time.Date(2030, 5, 6, 8, 0, 0, 0, time.UTC)},
		{"@every 10s", time.Date(2030, 5, 6, 7, 8, 10, 0, time.UTC)},
		{"@every 1m30s", time.Unix((start.Unix()/90+1)*90, 0)},
		{"CRON_TZ=UTC 0 9 * * *", time.Date(2030, 5, 6, 9, 0, 0, 0, time.UTC)},
	}
	for _, c := range ok {
		s, err := parseSpec(c.spec)
		if err != nil {
			t.Errorf("parseSpec(%q): %v", c.spec, err)
			continue
		}
		if got := s.Next(start); !got.Equal(c.next) {
			t.Errorf("parseSpec(%q).Next = %v, want %v", c.spec, got, c.next)
		}
		if strings.HasPrefix(c.spec, "@every") {
			if _, aligned := s.(every); !aligned {
				t.Errorf("parseSpec(%q) = %T, want the epoch-aligned schedule", c.spec, s)
			}
		}
	}
	for _, spec := range []string{"", "bogus", "* * * * * * *", "61 * * * * *", "TZ=UTC", "CRON_TZ=Nowhere/Never * * * * *", "@every nonsense"} {
		if s, err := parseSpec(spec); err == nil {
			t.Errorf("parseSpec(%q) = %v, want an error", spec, s)
		}
	}
}

func TestNearest_toleratesLateTimerAndSkew(t *testing.T) {
	at := func(h, m, s int) time.Time { return time.Date(2030, 1, 2, h, m, s, 0, time.UTC) }
	everySecond, _ := parseSpec("* * * * * *")
	everyMinute, _ := parseSpec("* * * * *")
	nineAndTen, _ := parseSpec("0 0 9,10 * * *")
	cases := []struct {
		name   string
		s      cron.Schedule
		tick   time.Time
		offset []time.Duration
	}{
		{"1s", everySecond, at(12, 0, 5), []time.Duration{-499 * time.Millisecond, -300 * time.Millisecond, 0, time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond}},
		{"1m", everyMinute, at(12, 1, 0), []time.Duration{-29 * time.Second, -300 * time.Millisecond, 0, 300 * time.Millisecond, 30 * time.Second}},
		{"every7s", Every(7 * time.Second), time.Unix(7*300_000_000, 0), []time.Duration{-3 * time.Second, 0, 3 * time.Second}},
		{"9and10 at 9", nineAndTen, at(9, 0, 0), []time.Duration{-11 * time.Hour, 0, 29 * time.Minute}},
		{"9and10 at 10", nineAndTen, at(10, 0, 0), []time.Duration{-29 * time.Minute, 0, 11 * time.Hour}},
	}
	for _, c := range cases {
		for _, off := range c.offset {
			if got := nearest(c.s, c.tick.Add(off)); !got.Equal(c.tick) {
				t.Errorf("%s: nearest(tick%+v) = %v, want %v", c.name, off, got, c.tick)
			}
		}
	}
}

func TestNearest_matchesBruteForce(t *testing.T) {
	day := 24 * time.Hour
	specs := []struct {
		spec string
		back time.Duration // more than the longest gap
	}{{"* * * * * *", 2 * time.Second}, {"*/7 * * * * *", 10 * time.Second}, {"0 */5 * * * *", 6 * time.Minute},
		{"0 0 9,10 * * MON-FRI", 4 * day}, {"0 30 2 1 * *", 32 * day}, {"@every 13s", 14 * time.Second}}
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, sp := range specs {
		spec := sp.spec
		s, err := parseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		for range 200 {
			now := base.Add(time.Duration(r.Int64N(int64(60 * day))))
			// Brute force: walk the activations from far enough back.
			var prev time.Time
			next := s.Next(now.Add(-sp.back))
			for !next.After(now) {
				prev, next = next, s.Next(next)
			}
			want := next
			if !prev.IsZero() && now.Sub(prev) <= next.Sub(now) {
				want = prev
			}
			if got := nearest(s, now); !got.Equal(want) {
				t.Fatalf("%s: nearest(%v) = %v, want %v", spec, now, got, want)
			}
		}
	}
}

func TestNearest_noActivation(t *testing.T) {
	s, err := parseSpec("0 0 30 2 *") // February 30th
	if err != nil {
		t.Fatal(err)
	}
	if got := nearest(s, time.Now()); !got.IsZero() {
		t.Fatalf("nearest = %v, want zero", got)
	}
}

func TestMarkerTTL(t *testing.T) {
	s, _ := parseSpec("* * * * *")
	tick := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// Written 2s after the tick: kept until one minute after the next tick.
	if got := markerTTL(s, tick, tick.Add(2*time.Second)); got != 118*time.Second {
		t.Errorf("markerTTL = %v, want 118s", got)
	}
	// A run that outlived the window still gets a positive TTL.
	if got := markerTTL(s, tick, tick.Add(time.Hour)); got != time.Second {
		t.Errorf("markerTTL = %v, want 1s", got)
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, seed := range []string{"* * * * * *", "*/5 * * * *", "@every 10s", "@daily", "TZ=UTC", "CRON_TZ=UTC 0 9 * * 1-5",
		"0 0 30 2 *", "1-5/2 3,4 * JAN-MAR ?", "@every 0s", "0 0 29 2 *"} {
		f.Add(seed, int64(1_900_000_000), int64(123))
	}
	f.Fuzz(func(t *testing.T, spec string, sec, nsec int64) {
		s, err := parseSpec(spec)
		if err != nil {
			return
		}
		now := time.Unix(1_900_000_000+sec%(400*24*3600), nsec%1e9).UTC()
		next := s.Next(now)
		prev := previous(s, now, next)
		if !prev.IsZero() {
			if prev.After(now) {
				t.Fatalf("%q: previous(%v) = %v is after now", spec, now, prev)
			}
			if n := s.Next(prev); !n.IsZero() && !n.After(now) {
				t.Fatalf("%q: previous(%v) = %v, but %v is a later activation", spec, now, prev, n)
			}
			if n := s.Next(prev.Add(-time.Nanosecond)); !n.Equal(prev) {
				t.Fatalf("%q: previous(%v) = %v is not an activation (next of it is %v)", spec, now, prev, n)
			}
		}
		got := nearest(s, now)
		if !got.Equal(prev) && !got.Equal(next) {
			t.Fatalf("%q: nearest(%v) = %v, neither %v nor %v", spec, now, got, prev, next)
		}
	})
}

// BenchmarkNearest measures the tick derivation on a second, a minute and a weekday schedule.
func BenchmarkNearest(b *testing.B) {
	now := time.Date(2030, 1, 2, 12, 0, 0, 300_000_000, time.UTC)
	for _, spec := range []string{"* * * * * *", "* * * * *", "0 0 9 * * MON-FRI"} {
		s, err := parseSpec(spec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(spec, func(b *testing.B) {
			for b.Loop() {
				nearest(s, now)
			}
		})
	}
}
