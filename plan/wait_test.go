package plan

import (
	"errors"
	"math"
	"testing"
)

func close(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

// TestWaitMM1AndMMc: the closed forms for one slot (the time in system is
// exponential at μ − λ) and Erlang C for four, at 100 items a second per
// slot.
func TestWaitMM1AndMMc(t *testing.T) {
	cases := []struct {
		slots                  int64
		rate                   float64
		pWait, meanWait, meanW float64 // seconds
		p99Wait, p99W          float64
	}{
		// M/M/1: P(wait) = ρ, Wq = ρ/(μ−λ), W = 1/(μ−λ), p99 W = ln 100/(μ−λ),
		// p99 Wq = ln(100ρ)/(μ−λ).
		{1, 50, 0.5, 0.010, 0.020, math.Log(50) / 50, math.Log(100) / 50},
		{1, 90, 0.9, 0.090, 0.100, math.Log(90) / 10, math.Log(100) / 10},
		// M/M/4 (Erlang C): a = 3 gives C = 0.50943, a = 3.8 gives C = 0.89142 (checked against the factorial form).
		// Their p99 in system (60.1 ms, 235.4 ms) is from 2,000,000 draws of
		// the wait and service (Monte Carlo, within 0.5 %).
		{4, 300, 0.509434, 0.509434 / 100, 0.010 + 0.509434/100, math.Log(50.9434) / 100, 0.0601},
		{4, 380, 0.891419, 0.891419 / 20, 0.010 + 0.891419/20, math.Log(89.1419) / 20, 0.2354},
	}
	for _, c := range cases {
		r, err := Wait{Slots: c.slots, ServiceTime: 0.010, Rate: c.rate}.Solve()
		if err != nil {
			t.Fatal(err)
		}
		if !r.Stable || !close(r.PWait, c.pWait, 1e-4) || !close(r.MeanWait, c.meanWait, 1e-4) || !close(r.MeanInSystem, c.meanW, 1e-4) ||
			!close(r.P99Wait, c.p99Wait, 1e-4) || !close(r.P99InSystem, c.p99W, 5e-3) {
			t.Errorf("c=%d λ=%v: got %+v", c.slots, c.rate, r)
		}
		if !close(r.Load, c.rate*0.010, 1e-12) || !close(r.Utilization, c.rate*0.010/float64(c.slots), 1e-12) {
			t.Errorf("c=%d λ=%v: load %v utilization %v", c.slots, c.rate, r.Load, r.Utilization)
		}
	}
	// The mean times in system the driver's tests compare with: 20 ms,
	// 100 ms, 15.1 ms and 54.6 ms.
	for _, c := range []struct {
		slots int64
		rate  float64
		ms    float64
	}{{1, 50, 20}, {1, 90, 100}, {4, 300, 15.1}, {4, 380, 54.6}} {
		r, _ := Wait{Slots: c.slots, ServiceTime: 0.010, Rate: c.rate}.Solve()
		if math.Abs(r.MeanInSystem*1000-c.ms) > 0.05 {
			t.Errorf("c=%d λ=%v: mean in system %.2f ms, want %.1f", c.slots, c.rate, r.MeanInSystem*1000, c.ms)
		}
		// The p99 in system solves P(T > t) = 1 %: check it from outside.
		if r.P99InSystem <= r.P99Wait || r.P99InSystem <= 0.010*math.Log(100)*0.999 {
			t.Errorf("c=%d λ=%v: p99 in system %v not above the p99 wait %v and the service's own p99", c.slots, c.rate, r.P99InSystem, r.P99Wait)
		}
	}
	// Few waits: P(wait) at most 1 % makes the p99 wait zero.
	r, _ := Wait{Slots: 10, ServiceTime: 0.010, Rate: 100}.Solve()
	if r.PWait > 0.01 || r.P99Wait != 0 || r.MeanWait <= 0 {
		t.Errorf("10 slots at a = 1: %+v", r)
	}
	// Many slots stay finite (factorials would not).
	r, err := Wait{Slots: 100000, ServiceTime: 1, Rate: 99000}.Solve()
	if err != nil || !r.Stable || !(r.PWait > 0 && r.PWait < 1) || math.IsNaN(r.P99InSystem) {
		t.Errorf("100,000 slots: %+v %v", r, err)
	}
}

// TestWaitUnstable: arrivals at or above what the slots complete have no
// steady state; the result says so instead of printing figures.
func TestWaitUnstable(t *testing.T) {
	for _, rate := range []float64{400, 500} {
		r, err := Wait{Slots: 4, ServiceTime: 0.010, Rate: rate}.Solve()
		if err != nil || r.Stable || r.MeanWait != 0 || r.Utilization < 1 {
			t.Errorf("λ=%v on 4 slots of 100/s: %+v %v, want unstable", rate, r, err)
		}
	}
}

// TestWaitSlotsNeeded: the fewest slots whose p99 wait meets the target,
// and one fewer does not.
func TestWaitSlotsNeeded(t *testing.T) {
	for _, target := range []float64{0.001, 0.050, 0.200, 1} {
		r, err := Wait{Slots: 4, ServiceTime: 0.010, Rate: 380, TargetP99Wait: target}.Solve()
		if err != nil {
			t.Fatal(err)
		}
		n := r.NeededSlots
		at, _ := Wait{Slots: n, ServiceTime: 0.010, Rate: 380}.Solve()
		below, _ := Wait{Slots: n - 1, ServiceTime: 0.010, Rate: 380}.Solve()
		if !at.Stable || at.P99Wait > target || (below.Stable && below.P99Wait <= target) {
			t.Errorf("target %v: %d slots needed, but p99 wait %v at %d and %v at %d", target, n, at.P99Wait, n, below.P99Wait, n-1)
		}
		if r.MeetsTarget != (4 >= n) {
			t.Errorf("target %v: meets %v with 4 slots and %d needed", target, r.MeetsTarget, n)
		}
	}
	// 4 slots at 380/s wait 224 ms at the p99; 5 slots bring it to 32 ms.
	r, _ := Wait{Slots: 4, ServiceTime: 0.010, Rate: 380, TargetP99Wait: 0.050}.Solve()
	if r.NeededSlots != 5 || r.MeetsTarget {
		t.Errorf("target 50 ms at 380/s: %d needed, meets %v; want 5, false", r.NeededSlots, r.MeetsTarget)
	}
	// Without slots: the figures at the slots needed.
	r, err := Wait{ServiceTime: 0.010, Rate: 380, TargetP99Wait: 0.050}.Solve()
	if err != nil || r.Slots != 5 || !r.MeetsTarget || r.P99Wait > 0.050 {
		t.Errorf("no slots, target 50 ms: %+v %v", r, err)
	}
}

func TestWaitRefusesBadInput(t *testing.T) {
	for name, in := range map[string]Wait{
		"no slots":         {ServiceTime: 0.01, Rate: 1},
		"negative slots":   {Slots: -1, ServiceTime: 0.01, Rate: 1},
		"too many slots":   {Slots: MaxSlots + 1, ServiceTime: 0.01, Rate: 1},
		"no service time":  {Slots: 1, Rate: 1},
		"no rate":          {Slots: 1, ServiceTime: 0.01},
		"NaN rate":         {Slots: 1, ServiceTime: 0.01, Rate: math.NaN()},
		"negative service": {Slots: 1, ServiceTime: -1, Rate: 1},
		"infinite target":  {Slots: 1, ServiceTime: 0.01, Rate: 1, TargetP99Wait: math.Inf(1)},
		"absurd load":      {Slots: 1, ServiceTime: 1e6, Rate: 1e6},
	} {
		_, err := in.Solve()
		var ie *InputError
		if !errors.Is(err, ErrInvalidInput) || !errors.As(err, &ie) || ie.Field == "" {
			t.Errorf("%s: err %v, want an InputError wrapping ErrInvalidInput", name, err)
		}
	}
}
