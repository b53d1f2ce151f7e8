package limit

import (
	"math"
	"runtime/metrics"
	"sync"
	"time"
)

const schedMetric = "/sched/latencies:seconds"

// SchedLatency is a Signal from the Go runtime: a quantile of the time
// goroutines spent runnable but not running (runtime/metrics
// /sched/latencies:seconds) over the interval since the previous call.
// When a service is CPU-bound, this rises first, before handler latency
// explodes: every goroutine waits for a P. Used as Config.Signal with an
// SLO of a few milliseconds, it sheds load while there is still CPU to
// serve what was admitted.
//
// The zero value is usable and reports the 99th percentile. Safe for
// concurrent use. The first call only takes a reference reading and
// reports false.
type SchedLatency struct {
	// Quantile in (0,1]; 0 or outside means 0.99.
	Quantile float64

	mu      sync.Mutex
	sample  [1]metrics.Sample
	prev    []uint64
	hasPrev bool
}

// Latency implements Signal.
func (s *SchedLatency) Latency(time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sample[0].Name = schedMetric
	metrics.Read(s.sample[:])
	if s.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, false
	}
	h := s.sample[0].Value.Float64Histogram()
	q := s.Quantile
	if q <= 0 || q > 1 {
		q = 0.99
	}
	var d time.Duration
	ok := false
	if s.hasPrev && len(s.prev) == len(h.Counts) {
		d, ok = schedQuantile(s.prev, h.Counts, h.Buckets, q)
	}
	s.prev = append(s.prev[:0], h.Counts...)
	s.hasPrev = true
	return d, ok
}

// schedQuantile is the q-quantile of the samples counted between two
// readings of a runtime histogram (buckets has one more boundary than the
// counts). The value is the upper boundary of the bucket the quantile falls
// in (its lower one for the open-ended last bucket). It reports false when
// nothing was counted in between.
func schedQuantile(prev, cur []uint64, buckets []float64, q float64) (time.Duration, bool) {
	var total uint64
	for i := range cur {
		total += cur[i] - prev[i]
	}
	if total == 0 {
		return 0, false
	}
	rank := uint64(math.Ceil(q * float64(total)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i := range cur {
		seen += cur[i] - prev[i]
		if seen >= rank {
			edge := buckets[i+1]
			if math.IsInf(edge, 1) {
				edge = buckets[i]
			}
			if edge <= 0 || math.IsInf(edge, 0) {
				return 0, true
			}
			return time.Duration(edge * float64(time.Second)), true
		}
	}
	return 0, false
}
