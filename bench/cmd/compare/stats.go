package main

import (
	"math/bits"
	"slices"
	"time"
)

// hist is a log-linear latency histogram (relative precision 1/64) that records without
// allocating, so that allocs/op counts the libraries only.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
}

const (
	histSub     = 64 // values below 2*histSub ns are exact; above, 64 buckets per power of two
	histBuckets = 2 * histSub * 40
)

func histIndex(v int64) int {
	if v < 2*histSub {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - 7 // v >> shift is in [64, 127]
	i := 2*histSub + (shift-1)*histSub + int(uint64(v)>>shift) - histSub
	return min(i, histBuckets-1)
}

// histValue is the middle of bucket i.
func histValue(i int) int64 {
	if i < 2*histSub {
		return int64(i)
	}
	shift := (i-2*histSub)/histSub + 1
	top := int64((i-2*histSub)%histSub + histSub)
	return top<<shift + int64(1)<<(shift-1)
}

func (h *hist) record(d time.Duration) {
	h.counts[histIndex(int64(d))]++
	h.n++
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the q-quantile (0 < q ≤ 1) as the middle of its bucket.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(histValue(i))
		}
	}
	return 0
}

// pct returns the p-th percentile (nearest rank) of ds; ds is sorted in place.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(p/100*float64(len(ds)) + 0.5)
	return ds[min(max(rank, 1), len(ds))-1]
}

// spread is the median of per-round values with their min and max.
type spread struct {
	med, lo, hi float64
	n           int
}

func summarize(vs []float64) spread {
	if len(vs) == 0 {
		return spread{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{med: m, lo: s[0], hi: s[len(s)-1], n: len(s)}
}
