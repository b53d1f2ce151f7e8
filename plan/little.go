package plan

import (
	"fmt"
	"math"
	"strings"
)

// Scope is what a Little's law calculation counts.
type Scope string

// Scopes.
const (
	// ScopeSystem is everything between arrival and completion: items
	// queued plus items being worked on (L = λW).
	ScopeSystem Scope = "system"
	// ScopeQueue is the waiting line alone, before work starts
	// (Lq = λq·Wq).
	ScopeQueue Scope = "queue"
)

// LittleTolerance is how far Count / (Rate × Time) may stray from 1 before
// three given figures are said not to add up: 10 %.
const LittleTolerance = 0.10

// Little is the input of a Little's law calculation. Give exactly two of
// the three quantities (a count, a rate and a time) to solve for the third,
// or all three to check that they add up. Each figure names its scope: the
// count is either InSystem or Queued, the time either TotalTime or
// QueueTime, never both, and a queue figure is never combined with a
// whole-system figure.
//
// Zero means "not given" for every field. Negative, NaN and infinite
// values are refused.
type Little struct {
	// Rate is λ, the long-run average rate at which items enter the scope,
	// per second. For the queue alone it is the rate of items that had to
	// queue (λq), which may be less than the arrival rate.
	Rate float64

	// InSystem is L, the average number of items in the system (queued
	// plus being worked on).
	InSystem float64
	// Waiting, when given, is added to InSystem: the average of a gate's
	// waiting gauge (sluice_admission_waiting), for an InSystem that is
	// its inflight gauge (sluice_admission_inflight), which counts the
	// slots held and leaves the queue out. It needs InSystem; for the
	// queue alone, give Queued.
	Waiting float64
	// Queued is Lq, the average number of items waiting, not yet started.
	Queued float64

	// TotalTime is W, the average time from arrival to completion, in
	// seconds: queueing plus the work.
	TotalTime float64
	// QueueTime is Wq, the average time from arrival to the start of work,
	// in seconds.
	QueueTime float64

	// Statistic names what the time and count figures are: "" or "mean"
	// (accepted), anything else ("p50", "p99", "max", ...) is refused with
	// ErrNotAverage.
	Statistic string
}

// LittleResult is a solved Little's law calculation.
type LittleResult struct {
	Scope  Scope   `json:"scope"`
	Rate   float64 `json:"rate_per_second"` // λ (or λq)
	Count  float64 `json:"count"`           // L (or Lq)
	Time   float64 `json:"time_seconds"`    // W (or Wq)
	Solved string  `json:"solved"`          // "count", "rate", "time", or "check" when all three were given
	// Ratio is Count / (Rate × Time) when all three were given: 1 when
	// the figures add up. Zero otherwise.
	Ratio float64 `json:"ratio,omitempty"`
	// AddsUp reports whether Ratio is within LittleTolerance of 1 (always
	// true when a figure was solved).
	AddsUp bool `json:"adds_up"`
}

// Solve applies Little's law to the given figures.
func (in Little) Solve() (LittleResult, error) {
	switch s := strings.ToLower(strings.TrimSpace(in.Statistic)); s {
	case "", "mean", "avg", "average":
	default:
		return LittleResult{}, &InputError{Field: "stat", Value: in.Statistic, Err: ErrNotAverage,
			Reason: "Little's law relates long-run averages; a percentile or maximum of the time is not an average, " +
				"and the law cannot predict one (bursts and uneven work change the tail). Give mean figures"}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"rate", in.Rate}, {"in-system", in.InSystem}, {"waiting", in.Waiting}, {"queued", in.Queued}, {"total-time", in.TotalTime}, {"queue-time", in.QueueTime}} {
		if err := checkFigure(f.name, f.v); err != nil {
			return LittleResult{}, err
		}
	}
	if in.Waiting > 0 && in.InSystem == 0 {
		return LittleResult{}, &InputError{Field: "waiting", Err: ErrInvalidInput,
			Reason: "the waiting gauge is added to in-system (the inflight gauge, which leaves the queue out); for the queue alone give queued"}
	}
	if in.Waiting > 0 && in.Queued > 0 {
		return LittleResult{}, &InputError{Field: "waiting/queued", Err: ErrInvalidInput,
			Reason: "give the queue once: waiting (added to in-system) or queued (the queue alone)"}
	}
	in.InSystem += in.Waiting
	if in.InSystem > 0 && in.Queued > 0 {
		return LittleResult{}, &InputError{Field: "in-system/queued", Err: ErrInvalidInput,
			Reason: "give one count: in-system (queued plus working) or queued (waiting only)"}
	}
	if in.TotalTime > 0 && in.QueueTime > 0 {
		return LittleResult{}, &InputError{Field: "total-time/queue-time", Err: ErrInvalidInput,
			Reason: "give one time: total-time (arrival to completion) or queue-time (arrival to start of work)"}
	}
	if in.Queued > 0 && in.TotalTime > 0 {
		return LittleResult{}, &InputError{Field: "queued/total-time", Err: ErrMixedScope,
			Reason: "the queue length Lq needs the time spent queued (Wq); a total time includes the work itself " +
				"and overstates the queue. Give queue-time, or count in-system instead"}
	}
	if in.InSystem > 0 && in.QueueTime > 0 {
		return LittleResult{}, &InputError{Field: "in-system/queue-time", Err: ErrMixedScope,
			Reason: "the number in the system L counts items being worked on too, so it needs the total time (W); " +
				"the queue time leaves the work out and understates L. Give total-time, or count queued instead"}
	}

	r := LittleResult{Scope: ScopeSystem, Rate: in.Rate, Count: in.InSystem, Time: in.TotalTime}
	if in.Queued > 0 || in.QueueTime > 0 {
		r.Scope, r.Count, r.Time = ScopeQueue, in.Queued, in.QueueTime
	}
	given := 0
	for _, v := range []float64{r.Rate, r.Count, r.Time} {
		if v > 0 {
			given++
		}
	}
	if given < 2 {
		return LittleResult{}, &InputError{Field: "rate/count/time", Err: ErrInvalidInput,
			Reason: "give two of the three figures (a rate, a count, a time) to solve for the third, or all three to check them"}
	}
	switch {
	case given == 3:
		r.Solved = "check"
		r.Ratio = r.Count / (r.Rate * r.Time)
		r.AddsUp = math.Abs(r.Ratio-1) <= LittleTolerance
	case r.Count == 0:
		r.Solved, r.Count = "count", r.Rate*r.Time
	case r.Rate == 0:
		r.Solved, r.Rate = "rate", r.Count/r.Time
	default:
		r.Solved, r.Time = "time", r.Count/r.Rate
	}
	if r.Solved != "check" {
		r.AddsUp = true
	}
	for _, v := range []float64{r.Rate, r.Count, r.Time, r.Ratio} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v > maxFigure {
			return LittleResult{}, &InputError{Field: "rate/count/time", Err: ErrInvalidInput,
				Reason: fmt.Sprintf("the figures give %s, out of range; check their units", figure(v))}
		}
	}
	return r, nil
}
