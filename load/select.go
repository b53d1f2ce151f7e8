package load

import (
	"fmt"
	"math"
	"time"
)

// Totals are what a selection of a report's windows adds up to: the
// figures capacity arithmetic reads from a run (plan little, plan drain).
type Totals struct {
	// Step is the step read, from 1; Windows how many of its windows.
	Step, Windows int
	// Seconds is the windows' scheduled length, together.
	Seconds float64
	// The windows' outcome counts, added.
	Scheduled, Dropped, OK, Refused int64
	// Answered is the requests that got an HTTP answer (ok, refused,
	// http_error): those whose request time was measured.
	Answered int64
	// MeanRequestTime is their mean request time (sent to done), in
	// seconds: the time the server had each in hand, as the driver saw it.
	MeanRequestTime float64
}

// Totals adds up the windows of one step: step and window count from 1,
// and zero means the last step and every window of it. A selection
// outside the report is a *FieldError naming "Step" or "Window"; a window
// whose figures cannot be used (a duration that is not a positive number,
// a broken request-time summary) wraps ErrBadReport.
func (r *Report) Totals(step, window int) (Totals, error) {
	bad := func(field string, v int, reason string) error {
		return &FieldError{Field: field, Value: fmtInt(v), Reason: reason, Err: ErrBadReport}
	}
	if len(r.Steps) == 0 {
		return Totals{}, fmt.Errorf("%w: the report has no steps", ErrBadReport)
	}
	if step < 0 || step > len(r.Steps) {
		return Totals{}, bad("Step", step, fmt.Sprintf("is not in the report: the report has steps 1 to %d", len(r.Steps)))
	}
	if step == 0 {
		step = len(r.Steps)
	}
	s := r.Steps[step-1]
	if window < 0 || window > len(s.Windows) {
		return Totals{}, bad("Window", window, fmt.Sprintf("is not in step %d, which has windows 1 to %d", step, len(s.Windows)))
	}
	windows := s.Windows
	if window > 0 {
		windows = windows[window-1 : window]
	}
	if len(windows) == 0 {
		return Totals{}, fmt.Errorf("%w: step %d has no windows", ErrBadReport, step)
	}
	t := Totals{Step: step, Windows: len(windows)}
	var weighted float64
	for _, w := range windows {
		if !(w.DurationS > 0) || math.IsInf(w.DurationS, 0) {
			return Totals{}, fmt.Errorf("%w: step %d window %d: duration %v s is not a positive number", ErrBadReport, step, w.Index, w.DurationS)
		}
		d := w.Latency.RequestTime
		if d.Count < 0 || math.IsNaN(d.Mean) || math.IsInf(d.Mean, 0) || d.Mean < 0 {
			return Totals{}, fmt.Errorf("%w: step %d window %d: bad request time summary", ErrBadReport, step, w.Index)
		}
		c := w.Counts
		if c.Scheduled < 0 || c.Dropped < 0 || c.OK < 0 || c.Refused < 0 {
			return Totals{}, fmt.Errorf("%w: step %d window %d: negative counts", ErrBadReport, step, w.Index)
		}
		t.Seconds += w.DurationS
		t.Scheduled += c.Scheduled
		t.Dropped += c.Dropped
		t.OK += c.OK
		t.Refused += c.Refused
		t.Answered += d.Count
		weighted += float64(d.Count) * d.Mean
	}
	if t.Answered > 0 {
		t.MeanRequestTime = weighted / float64(t.Answered) / 1000
	}
	return t, nil
}

// LoadSettings are the load a run puts on its server, as a profile case
// can supply them: an open loop's Rate or a closed loop's Concurrency,
// the Workers, Windows, Duration of each window and the P99Budget.
type LoadSettings struct {
	Rate        float64
	Concurrency int
	Workers     int
	Windows     int
	Duration    time.Duration
	P99Budget   time.Duration
}

// ApplyTo fills s with c's load settings where the caller did not set
// them: given(field) says whether it did, by LoadSettings field name. The
// case's rate or concurrency applies only when neither was given (either
// one chooses the loop); its p99_budget_ms also sets P99Budget.
func (c Case) ApplyTo(s *LoadSettings, given func(field string) bool) {
	loop := given("Rate") || given("Concurrency")
	if c.Rate > 0 && !loop {
		s.Rate, s.Concurrency = c.Rate, 0
	}
	if c.Concurrency > 0 && !loop {
		s.Concurrency, s.Rate = c.Concurrency, 0
	}
	if c.Workers > 0 && !given("Workers") {
		s.Workers = c.Workers
	}
	if c.Windows > 0 && !given("Windows") {
		s.Windows = c.Windows
	}
	if c.Duration != "" && !given("Duration") {
		if d, err := time.ParseDuration(c.Duration); err == nil { // ParseProfile checked it
			s.Duration = d
		}
	}
	if c.P99BudgetMS > 0 && !given("P99Budget") {
		s.P99Budget = time.Duration(c.P99BudgetMS * float64(time.Millisecond))
	}
}
