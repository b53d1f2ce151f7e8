package load

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// poissonOffsets draws one window's Poisson arrivals over shape.
func poissonOffsets(shape Shape, seed uint64) []time.Duration {
	tt := &timetable{shape: shape, rng: newArrivalSource(seed)}
	var out []time.Duration
	for {
		off, ok := tt.next()
		if !ok {
			return out
		}
		out = append(out, off)
	}
}

// TestPoissonArrivals checks the generator against the Poisson process it
// claims to be, on 100,000 arrivals (1,000/s for 100 s of timetable; no
// time passes): the count within 5 standard deviations of λT (±1.6 %),
// the gaps exponential at rate λ (Kolmogorov–Smirnov, D·√n under 1.95,
// the 0.1 % critical value), and counts per 100 ms as dispersed as a
// Poisson count (variance / mean within 1 ± 0.25: its standard error over
// 1,000 bins is 0.045). Evenly spaced or clumped arrivals at the right
// rate fail the last two; a wrong rate fails the first.
func TestPoissonArrivals(t *testing.T) {
	const rate, secs, bins = 1000.0, 100, 1000
	shape := mustShape(t, rate, secs*time.Second)
	offs := poissonOffsets(shape, 42)
	want := rate * secs
	if n := float64(len(offs)); math.Abs(n-want) > 5*math.Sqrt(want) {
		t.Errorf("%v arrivals, want %v ± %.0f", n, want, 5*math.Sqrt(want))
	}
	if !slices.IsSorted(offs) || offs[0] < 0 || offs[len(offs)-1] >= shape.Duration() {
		t.Fatal("arrivals out of order or outside the window")
	}
	gaps := make([]float64, len(offs))
	prev := time.Duration(0)
	for i, o := range offs {
		gaps[i] = (o - prev).Seconds()
		prev = o
	}
	slices.Sort(gaps)
	d := 0.0
	n := float64(len(gaps))
	for i, g := range gaps {
		cdf := 1 - math.Exp(-rate*g)
		d = max(d, math.Abs(cdf-float64(i)/n), math.Abs(cdf-float64(i+1)/n))
	}
	if d*math.Sqrt(n) > 1.95 {
		t.Errorf("gaps are not exponential at %v/s: KS D·√n = %.2f > 1.95", rate, d*math.Sqrt(n))
	}
	perBin := make([]float64, bins)
	for _, o := range offs {
		perBin[int(o*bins/shape.Duration())]++
	}
	mean, m2 := 0.0, 0.0
	for _, c := range perBin {
		mean += c / bins
	}
	for _, c := range perBin {
		m2 += (c - mean) * (c - mean) / (bins - 1)
	}
	if idx := m2 / mean; idx < 0.75 || idx > 1.25 {
		t.Errorf("counts per 100 ms: variance/mean %.2f, want 1 ± 0.25 (Poisson)", idx)
	}

	// Steps and ramps: the rate at each moment is the shape's. 100/s then
	// 400/s for 100 s each; a ramp from 0 to 1,000/s over 100 s puts a
	// quarter of its 50,000 arrivals in the first half.
	steps, err := Stepped([]float64{100, 400}, 200*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ramp, err := Ramp(0, 1000, 100*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		shape       Shape
		split       time.Duration
		first, rest float64
	}{
		{"steps", steps, 100 * time.Second, 10000, 40000},
		{"ramp", ramp, 50 * time.Second, 12500, 37500},
	} {
		var a, b float64
		for _, o := range poissonOffsets(c.shape, 7) {
			if o < c.split {
				a++
			} else {
				b++
			}
		}
		if math.Abs(a-c.first) > 5*math.Sqrt(c.first) || math.Abs(b-c.rest) > 5*math.Sqrt(c.rest) {
			t.Errorf("%s: %v then %v arrivals, want %v and %v (± 5 standard deviations)", c.name, a, b, c.first, c.rest)
		}
	}

	// The seed names the timetable.
	if !slices.Equal(poissonOffsets(steps, 9), poissonOffsets(steps, 9)) {
		t.Error("the same seed gave two timetables")
	}
	if slices.Equal(poissonOffsets(steps, 9), poissonOffsets(steps, 10)) {
		t.Error("two seeds gave the same timetable")
	}
}

// TestSynctestPoissonStepsRecordTheirSeed: a Poisson step reports its
// arrival process and seed, a seed reproduces the step's timetable second
// by second, and zero draws a seed that the report then names.
func TestSynctestPoissonStepsRecordTheirSeed(t *testing.T) {
	run := func(seed uint64) Step {
		var st Step
		synctest.Test(t, func(t *testing.T) {
			fs := &fakeServer{busy: make(chan struct{}, 1), start: time.Now(), latency: time.Millisecond}
			st, _ = runOne(t, context.Background(), Config{
				Targets: []Target{{URL: "http://fake/"}}, Shape: mustShape(t, 200, 3*time.Second), Windows: 2,
				Arrivals: Poisson, Seed: seed, Workers: 8, QueueDepth: 1000, Transport: fs, coarseSleep: true,
			})
		})
		return st
	}
	a, b, c := run(5), run(5), run(0)
	if a.Arrivals != Poisson || a.Seed != 5 || c.Seed == 0 || c.Seed > MaxSeed {
		t.Errorf("steps record arrivals %q seed %d, and a drawn seed %d", a.Arrivals, a.Seed, c.Seed)
	}
	sched := func(st Step) []int64 {
		var out []int64
		for _, w := range st.Windows {
			for _, s := range w.Timeline {
				out = append(out, s.Scheduled)
			}
		}
		return out
	}
	if !slices.Equal(sched(a), sched(b)) {
		t.Errorf("seed 5 twice: %v and %v arrivals a second", sched(a), sched(b))
	}
	if slices.Equal(sched(a)[:3], sched(a)[3:]) {
		t.Errorf("the two windows drew the same arrivals: %v", sched(a))
	}
	r := newReport("load", Meta{Command: []string{"sluice", "load"}})
	r.Steps = []Step{a}
	if errs := validateSchema(loadSchema(t), asJSON(t, r)); len(errs) > 0 {
		t.Errorf("a Poisson report violates the schema: %v", errs)
	}
	for _, w := range a.Windows {
		if n := w.Counts.Scheduled; math.Abs(float64(n)-600) > 5*math.Sqrt(600) {
			t.Errorf("window %d: %d arrivals, want 600 ± 122", w.Index, n)
		}
	}

	for name, cfg := range map[string]Config{
		"closed loop":     {Concurrency: 2, Arrivals: Poisson},
		"unknown process": {Shape: mustShape(t, 10, time.Second), Arrivals: "bursty"},
		"seed too large":  {Shape: mustShape(t, 10, time.Second), Arrivals: Poisson, Seed: MaxSeed + 1},
	} {
		cfg.Targets = []Target{{URL: "http://fake/"}}
		if _, _, err := RunStep(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
}
