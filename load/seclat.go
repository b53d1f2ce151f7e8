package load

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Per-second percentiles for the timeline. A window's exact HDR histograms
// cost about 170 KB each, too much to keep one per second, so each second
// gets a coarse log-linear histogram instead: values below 16 µs exactly,
// above that 8 buckets per power of two (each about 9% wide; a percentile
// is read at its bucket's middle, within about 5%). Workers add to them with
// atomic increments, so no lock is shared between stripes; a second's
// buckets are allocated when its first answer arrives.
const (
	coarseExact   = 16
	coarseSub     = 8
	coarseBuckets = coarseExact + (30-4)*coarseSub // values up to 2^30 µs (18 min), past the histograms' 10
)

// coarseBucket maps a value in µs to its bucket.
func coarseBucket(us int64) int {
	if us < coarseExact {
		return int(max(us, 0))
	}
	e := bits.Len64(uint64(us)) - 1 // 2^e <= us < 2^(e+1), e >= 4
	sub := int(us>>(e-3)) & (coarseSub - 1)
	return min(coarseExact+(e-4)*coarseSub+sub, coarseBuckets-1)
}

// coarseValue is the middle of bucket b, in µs.
func coarseValue(b int) float64 {
	if b < coarseExact {
		return float64(b)
	}
	e := (b-coarseExact)/coarseSub + 4
	sub := (b - coarseExact) % coarseSub
	lo := float64(int64(1)<<e) * (1 + float64(sub)/coarseSub)
	w := float64(int64(1)<<e) / coarseSub
	return lo + w/2
}

// coarseQuantile reads quantile q (0..1) from counts; 0 when empty.
func coarseQuantile(counts []uint32, total uint64, q float64) float64 {
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	rank = min(max(rank, 1), total)
	var seen uint64
	for b, n := range counts {
		seen += uint64(n)
		if seen >= rank {
			return coarseValue(b)
		}
	}
	return coarseValue(len(counts) - 1)
}

// secCounts is one second's coarse histograms: every answer, and ok ones.
type secCounts struct {
	all, ok [coarseBuckets]atomic.Uint32
}

// secLatency holds a window's per-second response-time histograms, by
// scheduled second. Safe for concurrent record calls.
type secLatency struct {
	secs []atomic.Pointer[secCounts]
}

func newSecLatency(n int) *secLatency { return &secLatency{secs: make([]atomic.Pointer[secCounts], n)} }

func (l *secLatency) record(sec int, d time.Duration, ok bool) {
	p := &l.secs[sec]
	s := p.Load()
	if s == nil {
		s = new(secCounts)
		if !p.CompareAndSwap(nil, s) {
			s = p.Load()
		}
	}
	b := coarseBucket(int64(d / time.Microsecond))
	s.all[b].Add(1)
	if ok {
		s.ok[b].Add(1)
	}
}

// fill writes each second's p50, p99 and ok p99 (ms) into tl. It runs after
// every worker is done with the window.
func (l *secLatency) fill(tl []Second) {
	var all, ok [coarseBuckets]uint32
	for i := range tl {
		if i >= len(l.secs) {
			return
		}
		s := l.secs[i].Load()
		if s == nil {
			continue
		}
		var na, no uint64
		for b := range all {
			all[b], ok[b] = s.all[b].Load(), s.ok[b].Load()
			na += uint64(all[b])
			no += uint64(ok[b])
		}
		tl[i].ResponseP50 = coarseQuantile(all[:], na, 0.50) / 1000
		tl[i].ResponseP99 = coarseQuantile(all[:], na, 0.99) / 1000
		tl[i].OKResponseP99 = coarseQuantile(ok[:], no, 0.99) / 1000
	}
}

// lagSecond is the pacer's own per-second lag histogram: one goroutine
// records into it, and it is read and reset when the pacer moves on to the
// next second.
type lagSecond struct {
	sec    int
	counts [coarseBuckets]uint32
	n      uint64
}

func (l *lagSecond) record(sec int, d time.Duration, out []float64) {
	if sec != l.sec {
		l.flush(out)
		l.sec = sec
	}
	l.counts[coarseBucket(int64(d/time.Microsecond))]++
	l.n++
}

// flush writes the current second's p99 (ms) into out and clears it.
func (l *lagSecond) flush(out []float64) {
	if l.n > 0 && l.sec < len(out) {
		out[l.sec] = coarseQuantile(l.counts[:], l.n, 0.99) / 1000
	}
	l.counts = [coarseBuckets]uint32{}
	l.n = 0
}
