package limit

import (
	"context"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestSchedQuantile(t *testing.T) {
	buckets := []float64{math.Inf(-1), 0.0001, 0.001, 0.01, math.Inf(1)}
	prev := []uint64{0, 100, 10, 0}
	cur := []uint64{0, 190, 15, 5} // +90 in [100µs,1ms), +5 in [1ms,10ms), +5 above 10ms
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, time.Millisecond},
		{0.9, time.Millisecond},
		{0.95, 10 * time.Millisecond},
		{0.99, 10 * time.Millisecond}, // the open-ended bucket reports its lower edge
	} {
		got, ok := schedQuantile(prev, cur, buckets, tc.q)
		if !ok || got != tc.want {
			t.Errorf("q%v = %v, %v; want %v", tc.q, got, ok, tc.want)
		}
	}
	if _, ok := schedQuantile(cur, cur, buckets, 0.99); ok {
		t.Error("no new samples must report false")
	}
	// Samples in the open-ended first bucket read as its upper edge.
	got, ok := schedQuantile([]uint64{0, 0, 0, 0}, []uint64{3, 0, 0, 0}, buckets, 0.99)
	if !ok || got != 100*time.Microsecond {
		t.Errorf("lowest bucket: %v, %v; want its upper edge 100µs", got, ok)
	}
}

// The runtime signal: the first reading is a reference; after goroutines
// have been scheduled there is a value.
func TestSchedLatencyReadsRuntime(t *testing.T) {
	var s SchedLatency
	if _, ok := s.Latency(time.Now()); ok {
		t.Fatal("first reading must only take a reference")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var wg sync.WaitGroup
		for range 4 * runtime.GOMAXPROCS(0) {
			wg.Go(func() { runtime.Gosched() })
		}
		wg.Wait()
		d, ok := s.Latency(time.Now())
		if ok {
			if d < 0 || d > time.Minute {
				t.Fatalf("implausible scheduling latency %v", d)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no scheduling latency samples after scheduling goroutines for 5s")
		}
	}
}

// A Signal replaces hold times: with the runtime's scheduling latency far
// above a tight ceiling, the limit shrinks even though every request is
// fast.
func TestSignalDrivesTheLimit(t *testing.T) {
	sig := &fixedSignal{d: 20 * time.Millisecond}
	a, _ := mustNew(t, Config{Law: &Gradient2{}, Initial: 40, SLO: 5 * time.Millisecond, Signal: sig})
	now := epoch
	for range 10 {
		now = feedWindow(a, now, DefaultWindow, time.Millisecond, a.Limit(), 10)
	}
	st := a.State()
	if st.Limit >= 20 || !st.Overload || st.Latency != 20*time.Millisecond {
		t.Fatalf("a signal above the SLO must drive the limit down: %+v", st)
	}
	sig.off = true
	w := st.Windows
	feedWindow(a, now, DefaultWindow, time.Millisecond, a.Limit(), 10)
	if a.State().Windows != w {
		t.Fatal("a window without a signal reading must be skipped")
	}
}

type fixedSignal struct {
	d   time.Duration
	off bool
}

func (f *fixedSignal) Latency(time.Time) (time.Duration, bool) { return f.d, !f.off }

// A CPU-bound process: more spinning goroutines than Ps. Goroutines wait
// for a CPU, the runtime's scheduling latency rises far above a 5 ms
// ceiling, and an Adaptive that uses it as its signal sheds, although no
// request has completed at all.
func TestSchedLatencyShedsWhenCPUBound(t *testing.T) {
	if testing.Short() {
		t.Skip("spins the CPU for about a second")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, _ := mustNew(t, Config{Law: &AIMD{}, Initial: 40, SLO: 5 * time.Millisecond, Signal: &SchedLatency{}})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				for i := 0; i < 1e5; i++ {
					_ = i * i
				}
			}
		})
	}
	wg.Go(func() { a.Run(ctx) })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && a.State().Decisions[DecisionShrink] < 3 {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	st := a.State()
	if st.Decisions[DecisionShrink] < 3 || st.Limit >= 40 {
		t.Fatalf("CPU-bound: %d shrinks, limit %d, last scheduling latency %v", st.Decisions[DecisionShrink], st.Limit, st.Latency)
	}
	t.Logf("scheduling latency p99 %v; limit 40 -> %d after %d windows", st.Latency, st.Limit, st.Windows)
}
