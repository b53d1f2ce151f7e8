package load

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// FieldError says which setting was refused and why. Field is the
// setting's name as Go spells it: a Config field ("Workers",
// "QueueDepth", "P99Budget"), "Windows×Duration" for the run's length, a
// shape's parameter ("Rate", "RampTo", "Steps"), or a report selection
// ("Step", "Window"). A caller that reads the settings from flags maps
// Field to the flag's name (FieldError.For). It wraps ErrConfig,
// ErrBadShape or ErrBadReport.
type FieldError struct {
	Field  string
	Value  string // the value refused, formatted; empty when it says nothing
	Reason string // why, in a phrase: "is over the bound: at most 10000"
	Err    error
}

func (e *FieldError) Error() string { return fmt.Sprintf("%v: %s", e.Err, e.For(fieldWords[e.Field])) }

// Unwrap returns the sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

// For writes the refusal with the setting called name, as a CLI names its
// flag: For("--workers") is "--workers 20000 is over the bound: at most
// 10000". An empty name is the field's own.
func (e *FieldError) For(name string) string {
	if name == "" {
		name = e.Field
	}
	if e.Value == "" {
		return name + " " + e.Reason
	}
	return name + " " + e.Value + " " + e.Reason
}

// fieldWords are the fields as the package's own messages say them.
var fieldWords = map[string]string{
	"Targets": "targets", "Pick": "pick", "Shape": "shape duration", "Concurrency": "concurrency", "Duration": "duration",
	"Windows": "windows", "Windows×Duration": "windows × duration", "Workers": "workers", "QueueDepth": "queue depth",
	"P99Budget": "p99 budget", "MaxLag": "max lag", "MaxCPU": "max CPU", "Timeout": "timeout", "DrainTimeout": "drain timeout",
	"Arrivals": "arrivals", "Seed": "seed", "Body": "body bytes", "Rate": "rate", "RampTo": "ramp end rate", "Steps": "steps",
	"Segments": "segments", "Step": "step", "Window": "window",
}

func configErr(field, value, reason string) error {
	return &FieldError{Field: field, Value: value, Reason: reason, Err: ErrConfig}
}

func shapeErr(field, value, reason string) error {
	return &FieldError{Field: field, Value: value, Reason: reason, Err: ErrBadShape}
}

// fmtRate writes a rate without an exponent: 2000000, not 2e+06.
func fmtRate(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func fmtInt(v int) string { return strconv.Itoa(v) }

func fmtDur(v time.Duration) string { return v.String() }

// overBound is the reason for a size past its bound.
func overBound(max any) string { return fmt.Sprintf("is over the bound: at most %v", max) }
