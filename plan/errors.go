package plan

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Sentinel errors wrapped by every error Solve returns.
var (
	// ErrInvalidInput: a figure is negative, NaN, infinite, too large, or
	// a required figure is missing.
	ErrInvalidInput = errors.New("plan: invalid input")
	// ErrMixedScope: a figure of the queue alone was combined with a
	// figure of the whole system (queue plus work).
	ErrMixedScope = errors.New("plan: queue and whole-system figures mixed")
	// ErrNotAverage: a percentile or maximum was given where only a
	// long-run average is meaningful.
	ErrNotAverage = errors.New("plan: not an average")
)

// InputError says which input figure was refused and why. It wraps one of
// the sentinel errors.
type InputError struct {
	Field  string // the input's name, as the CLI flag spells it
	Value  string // the value given, formatted
	Reason string // why it was refused, in a sentence
	Err    error  // ErrInvalidInput, ErrMixedScope or ErrNotAverage
}

func (e *InputError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("%s %s: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns the sentinel.
func (e *InputError) Unwrap() error { return e.Err }

func invalid(field string, v float64, reason string) error {
	return &InputError{Field: field, Value: figure(v), Reason: reason, Err: ErrInvalidInput}
}

// figure writes v as a person types it: 2000000, not 2e+06 (an exponent
// only past 1e21, where plain digits stop being readable).
func figure(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) >= 1e21 {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// maxFigure bounds every input and result: beyond it float64 stops counting
// whole items exactly, and no real system has that many.
const maxFigure = 1 << 53

// checkFigure refuses NaN, infinities, negatives and absurdly large values.
func checkFigure(field string, v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return invalid(field, v, "must be a finite number")
	case v < 0:
		return invalid(field, v, "must not be negative")
	case v > maxFigure:
		return invalid(field, v, fmt.Sprintf("must be at most %d", int64(maxFigure)))
	}
	return nil
}
