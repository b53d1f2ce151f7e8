package load

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestErrorsNameTheSetting: every refusal of a setting is a *FieldError
// naming it as Go does, with the value written readably (2000000, not
// 2e+06), so a CLI can name its flag instead.
func TestErrorsNameTheSetting(t *testing.T) {
	tg := []Target{{URL: "http://127.0.0.1:1/"}}
	sh := mustShape(t, 10, time.Second)
	for want, cfg := range map[string]Config{
		"Workers":          {Targets: tg, Shape: sh, Workers: MaxWorkers + 1},
		"QueueDepth":       {Targets: tg, Shape: mustShape(t, 100000, time.Second), P99Budget: 5 * time.Minute},
		"Windows×Duration": {Targets: tg, Concurrency: 1, Duration: 20 * time.Hour, Windows: 2},
		"Concurrency":      {Targets: tg, Concurrency: -1},
		"Arrivals":         {Targets: tg, Shape: sh, Arrivals: "bursty"},
		"Seed":             {Targets: tg, Shape: sh, Arrivals: Poisson, Seed: MaxSeed + 1},
		"Pick":             {Targets: tg, Shape: sh, Pick: "random"},
		"MaxCPU":           {Targets: tg, Shape: sh, MaxCPU: math.NaN()},
		"Shape":            {Targets: tg},
	} {
		var fe *FieldError
		if err := cfg.Check(); !errors.As(err, &fe) || fe.Field != want || !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want a FieldError on %s wrapping ErrConfig", want, err, want)
		}
	}
	for want, f := range map[string]func() error{
		"Rate":   func() error { _, err := Constant(2e6, time.Second); return err },
		"RampTo": func() error { _, err := Ramp(10, math.Inf(1), time.Second); return err },
		"Steps":  func() error { _, err := Stepped([]float64{1, 0}, time.Second); return err },
	} {
		var fe *FieldError
		if err := f(); !errors.As(err, &fe) || fe.Field != want || !errors.Is(err, ErrBadShape) {
			t.Errorf("%s: err %v, want a FieldError on %s wrapping ErrBadShape", want, err, want)
		}
	}
	_, err := Constant(2e6, time.Second)
	var fe *FieldError
	if errors.As(err, &fe); fe.For("--rate") != "--rate 2000000 is over the bound: at most 1000000 requests per second" {
		t.Errorf("For(--rate) = %q", fe.For("--rate"))
	}
	total := []Config{{Targets: tg, Concurrency: 1, Duration: 13 * time.Hour}, {Targets: tg, Concurrency: 2, Duration: 13 * time.Hour}}
	if err := CheckSteps(total); !errors.As(err, &fe) || fe.Field != "Windows×Duration" {
		t.Errorf("two steps of 13 h: %v, want the run's length refused", err)
	}
}

// TestTotalsSelectWindows: a report's windows add up for the selection
// asked (the last step and all its windows by default), and a selection
// outside the report names Step or Window.
func TestTotalsSelectWindows(t *testing.T) {
	win := func(i int, sched, ok, refused, dropped int64, answered int64, meanMS float64) Window {
		return Window{Index: i, DurationS: 2, Counts: Counts{Scheduled: sched, OK: ok, Refused: refused, Dropped: dropped},
			Latency: Latency{RequestTime: Dist{Count: answered, Mean: meanMS}}}
	}
	r := &Report{Steps: []Step{
		{Windows: []Window{win(0, 10, 10, 0, 0, 10, 5)}},
		{Windows: []Window{win(0, 100, 60, 30, 10, 90, 10), win(1, 100, 80, 20, 0, 100, 20)}},
	}}
	got, err := r.Totals(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Totals{Step: 2, Windows: 2, Seconds: 4, Scheduled: 200, Dropped: 10, OK: 140, Refused: 50, Answered: 190,
		MeanRequestTime: (90*10 + 100*20) / 190.0 / 1000}
	if math.Abs(got.MeanRequestTime-want.MeanRequestTime) > 1e-15 {
		t.Errorf("mean request time %v, want %v", got.MeanRequestTime, want.MeanRequestTime)
	}
	got.MeanRequestTime = want.MeanRequestTime
	if got != want {
		t.Errorf("last step: %+v, want %+v", got, want)
	}
	if got, _ := r.Totals(2, 2); got.Windows != 1 || got.Scheduled != 100 || got.OK != 80 {
		t.Errorf("step 2 window 2: %+v", got)
	}
	if got, _ := r.Totals(1, 0); got.Step != 1 || got.OK != 10 {
		t.Errorf("step 1: %+v", got)
	}
	for _, c := range []struct {
		step, window int
		field        string
	}{{3, 0, "Step"}, {-1, 0, "Step"}, {2, 3, "Window"}, {1, -1, "Window"}} {
		var fe *FieldError
		if _, err := r.Totals(c.step, c.window); !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrBadReport) {
			t.Errorf("step %d window %d: %v, want a FieldError on %s", c.step, c.window, err, c.field)
		}
	}
}

// TestCaseApplyTo: a case's load settings fill what the caller did not
// set; its rate or concurrency only when neither was given.
func TestCaseApplyTo(t *testing.T) {
	c := Case{Rate: 1200, Workers: 48, Windows: 3, Duration: "60s", P99BudgetMS: 100}
	none := func(string) bool { return false }
	s := LoadSettings{Rate: 0, Workers: 64, Windows: 1, Duration: 10 * time.Second, P99Budget: 500 * time.Millisecond}
	c.ApplyTo(&s, none)
	if s != (LoadSettings{Rate: 1200, Workers: 48, Windows: 3, Duration: time.Minute, P99Budget: 100 * time.Millisecond}) {
		t.Errorf("nothing given: %+v", s)
	}
	s = LoadSettings{Concurrency: 8, Workers: 16, Windows: 1, Duration: time.Second, P99Budget: time.Second}
	c.ApplyTo(&s, func(f string) bool { return f == "Concurrency" || f == "Workers" })
	if s.Rate != 0 || s.Concurrency != 8 || s.Workers != 16 || s.Windows != 3 {
		t.Errorf("concurrency and workers given: %+v, want them kept and the case's rate left out", s)
	}
	closed := Case{Concurrency: 4}
	s = LoadSettings{}
	closed.ApplyTo(&s, none)
	if s.Concurrency != 4 || s.Rate != 0 {
		t.Errorf("closed case: %+v", s)
	}
}
