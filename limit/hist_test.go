package limit

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Every duration maps to a bucket whose reported value is within 1/16 of
// it (the buckets are 1/16 of a power of two wide), and buckets are in
// order.
func FuzzHistogramBucket(f *testing.F) {
	for _, d := range []int64{1, 15, 16, 17, 1000, 1e6, 10e6, 1e9, 1 << 40, 1<<40 - 1} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, ns int64) {
		d := time.Duration(ns)
		i := bucketOf(d)
		if i < 0 || i >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d outside 0..%d", ns, i, histBuckets)
		}
		if ns <= 0 || ns >= 1<<41 {
			return
		}
		v := bucketValue(i)
		if diff := float64(v-d) / float64(d); diff > 1.0/16 || diff < -1.0/16 {
			t.Fatalf("bucketValue(bucketOf(%v)) = %v: off by %.1f%%", d, v, 100*diff)
		}
		if ns > 1 && bucketOf(d-1) > i {
			t.Fatalf("buckets out of order at %d", ns)
		}
	})
}

// The histogram's quantile matches the exact quantile of the samples to
// within a bucket.
func TestHistogramQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var h histogram
		n := 1 + rng.IntN(500)
		samples := make([]time.Duration, n)
		for i := range samples {
			samples[i] = time.Duration(rng.Int64N(int64(time.Second)) + 1)
			h.add(samples[i])
		}
		slices.Sort(samples)
		for _, q := range []float64{0.5, 0.9, 0.99, 1} {
			want := samples[int(q*float64(n-1))]
			got := h.quantile(q)
			if bucketOf(got) != bucketOf(want) {
				t.Fatalf("n=%d q=%v: histogram %v, exact %v", n, q, got, want)
			}
		}
		h.reset()
		if h.quantile(0.5) != 0 || h.n.Load() != 0 {
			t.Fatal("reset left samples")
		}
	}
}
