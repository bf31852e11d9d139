package main

import (
	"math"
	"testing"
	"time"
)

func TestHist_bucketsKeepRelativePrecision(t *testing.T) {
	for _, v := range []int64{0, 1, 127, 128, 129, 255, 256, 1000, 12_345, 999_999, 1e9, 3.6e12} {
		i := histIndex(v)
		got := histValue(i)
		if v < 128 && got != v {
			t.Errorf("histValue(histIndex(%d)) = %d, want exact below 128", v, got)
		}
		if rel := math.Abs(float64(got-v)) / math.Max(float64(v), 1); rel > 1.0/64 {
			t.Errorf("value %d lands in bucket %d valued %d: off by %.3f", v, i, got, rel)
		}
	}
	prev := -1
	for v := int64(0); v < 1<<20; v += 7 {
		i := histIndex(v)
		if i < prev {
			t.Fatalf("histIndex(%d) = %d < histIndex of a smaller value (%d)", v, i, prev)
		}
		prev = i
	}
}

func TestHist_quantileAndMerge(t *testing.T) {
	var a, b hist
	for i := 1; i <= 99; i++ {
		a.record(time.Duration(i) * time.Microsecond)
	}
	b.record(time.Second)
	a.merge(&b)
	if a.n != 100 {
		t.Fatalf("n = %d, want 100", a.n)
	}
	if q := a.quantile(0.5); q < 49*time.Microsecond || q > 51*time.Microsecond {
		t.Errorf("p50 = %v, want ≈ 50µs", q)
	}
	if q := a.quantile(1); q < 990*time.Millisecond {
		t.Errorf("p100 = %v, want ≈ 1s", q)
	}
	var empty hist
	if q := empty.quantile(0.99); q != 0 {
		t.Errorf("empty quantile = %v", q)
	}
}

func TestPct_nearestRank(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := pct(ds, c.p); got != c.want {
			t.Errorf("pct(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if pct(nil, 50) != 0 {
		t.Error("pct of nothing is not 0")
	}
}

func TestSummarize(t *testing.T) {
	if s := summarize([]float64{3, 1, 2}); s != (spread{med: 2, lo: 1, hi: 3, n: 3}) {
		t.Errorf("odd: %+v", s)
	}
	if s := summarize([]float64{4, 1, 2, 3}); s.med != 2.5 || s.lo != 1 || s.hi != 4 {
		t.Errorf("even: %+v", s)
	}
	if s := summarize(nil); s.n != 0 || s.cell() != "–" {
		t.Errorf("empty: %+v %q", s, s.cell())
	}
}

func TestNumAndCell(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.0123: "0.012", 1.5: "1.50", 12.34: "12.3", 512: "512",
		41234: "41.2k", 2.5e6: "2.5M"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
	if got := (spread{med: 2, lo: 1, hi: 3, n: 3}).cell(); got != "2.00 (1.00–3.00)" {
		t.Errorf("cell = %q", got)
	}
	if got := (spread{med: 2, lo: 2, hi: 2, n: 3}).cell(); got != "2.00" {
		t.Errorf("cell of agreeing rounds = %q", got)
	}
}

func TestStore_pairedRatio(t *testing.T) {
	s := newStore()
	s.add("u", "1", "a", 0, metrics{"x": 90})
	s.add("u", "1", "b", 0, metrics{"x": 100})
	s.add("u", "1", "a", 1, metrics{"x": 50})
	s.add("u", "1", "b", 1, metrics{"x": 50})
	s.add("u", "1", "a", 2, metrics{"x": 10}) // b missing in round 2: not paired
	r := s.ratio("u", "1", "a", "b", "x")
	if r.n != 2 || r.lo != 0.9 || r.hi != 1 {
		t.Errorf("ratio = %+v, want 2 pairs from 0.9 to 1", r)
	}
	if g := s.get("u", "1", "a", "x"); g.med != 50 || g.n != 3 {
		t.Errorf("get = %+v", g)
	}
}
