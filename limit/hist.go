package limit

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// histogram counts latencies in log-linear buckets: 16 per power of two,
// so a quantile is within about 4% of the true value. Adding is two atomic
// increments and never allocates, so the sample path needs no lock; a
// quantile is a scan of at most histBuckets counters, done once per
// window by the one goroutine that judges it.
const (
	histSubBits = 4
	histSub     = 1 << histSubBits
	histMaxExp  = 40 // 2^40 ns ≈ 18 minutes; longer samples count as that
	histBuckets = (histMaxExp-histSubBits+1)*histSub + histSub
)

type histogram struct {
	n      atomic.Int64
	counts [histBuckets]atomic.Uint32
}

func bucketOf(d time.Duration) int {
	v := uint64(d)
	if d <= 0 {
		return 0
	}
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(v) - 1
	if e > histMaxExp {
		return histBuckets - 1
	}
	sub := (v >> (e - histSubBits)) & (histSub - 1)
	return (e-histSubBits+1)*histSub + int(sub)
}

// bucketValue is the middle of bucket i (its exact value below histSub).
func bucketValue(i int) time.Duration {
	if i < histSub {
		return time.Duration(i)
	}
	e := i/histSub + histSubBits - 1
	sub := uint64(i % histSub)
	lo := (uint64(1) << e) | sub<<(e-histSubBits)
	width := uint64(1) << (e - histSubBits)
	return time.Duration(lo + width/2)
}

func (h *histogram) add(d time.Duration) {
	h.counts[bucketOf(d)].Add(1)
	h.n.Add(1)
}

// reset empties h. A sample added concurrently may survive into the next
// use of h; that is one sample two windows late, not a lost invariant.
func (h *histogram) reset() {
	if h.n.Load() == 0 {
		return
	}
	for i := range h.counts {
		if h.counts[i].Load() != 0 {
			h.counts[i].Store(0)
		}
	}
	h.n.Store(0)
}

// quantile returns the q-quantile (0 < q ≤ 1) of the samples, 0 if none.
// The rank is rounded down, so with q = 0.5 and 2k samples the lower
// middle wins: one slow sample among many cannot move the result.
func (h *histogram) quantile(q float64) time.Duration {
	n := int(h.n.Load())
	if n == 0 {
		return 0
	}
	rank := int(q * float64(n-1)) // 0-based rank of the chosen sample
	seen := 0
	for i := range h.counts {
		seen += int(h.counts[i].Load())
		if seen > rank {
			return bucketValue(i)
		}
	}
	return bucketValue(histBuckets - 1)
}

// mean returns the mean of the samples (each counted at its bucket's
// middle), 0 if none.
func (h *histogram) mean() time.Duration {
	var n, sum float64
	for i := range h.counts {
		if c := h.counts[i].Load(); c != 0 {
			n += float64(c)
			sum += float64(c) * float64(bucketValue(i))
		}
	}
	if n == 0 {
		return 0
	}
	return time.Duration(sum / n)
}
