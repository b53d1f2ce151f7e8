package load

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Segment is one piece of an open-loop timetable: over Duration the arrival
// rate moves linearly from From to To requests per second. From == To is a
// constant rate.
type Segment struct {
	From, To float64
	Duration time.Duration
}

// Shape is an open-loop timetable for one window: arrival i is due at At(i)
// after the window starts, whatever the server does. The zero Shape schedules
// nothing. A Shape is immutable and safe for concurrent use.
type Shape struct {
	segs  []Segment
	start []time.Duration // offset where each segment starts
	cum   []float64       // arrivals scheduled before each segment starts
	total float64         // arrivals over the whole shape (not rounded)
}

// ErrBadShape reports a timetable that cannot be run (a rate <= 0 or above
// MaxRate, a negative or zero duration, more than MaxSegments pieces).
var ErrBadShape = errors.New("load: bad load shape")

// NewShape builds a timetable from segments. Every segment needs a positive
// duration and non-negative rates, and at least one rate in the shape must be
// positive.
func NewShape(segs ...Segment) (Shape, error) {
	if len(segs) > MaxSegments {
		return Shape{}, shapeErr("Segments", fmtInt(len(segs)), overBound(MaxSegments))
	}
	s := Shape{segs: append([]Segment(nil), segs...)}
	var t time.Duration
	var n float64
	positive := false
	for i, g := range segs {
		if g.Duration <= 0 {
			return Shape{}, shapeErr("Segments", fmt.Sprintf("%d (duration %v)", i, g.Duration), "needs a positive duration")
		}
		for _, r := range []float64{g.From, g.To} {
			if err := checkRate("Segments", fmt.Sprintf("%d (rate %s)", i, fmtRate(r)), r, true); err != nil {
				return Shape{}, err
			}
		}
		if g.From > 0 || g.To > 0 {
			positive = true
		}
		s.start = append(s.start, t)
		s.cum = append(s.cum, n)
		t += g.Duration
		n += (g.From + g.To) / 2 * g.Duration.Seconds()
	}
	if !positive {
		return Shape{}, shapeErr("Segments", "", "have no positive rate")
	}
	s.total = n
	return s, nil
}

// checkRate refuses a rate that is not a number, negative (or zero,
// unless zero is allowed) or over MaxRate, naming field and value.
func checkRate(field, value string, r float64, zeroOK bool) error {
	switch {
	case math.IsNaN(r) || r < 0 || r == 0 && !zeroOK:
		return shapeErr(field, value, "must be > 0")
	case r > MaxRate:
		return shapeErr(field, value, overBound(fmt.Sprintf("%d requests per second", MaxRate)))
	}
	return nil
}

// Constant is rate requests per second for d.
func Constant(rate float64, d time.Duration) (Shape, error) {
	if err := checkRate("Rate", fmtRate(rate), rate, false); err != nil {
		return Shape{}, err
	}
	return NewShape(Segment{From: rate, To: rate, Duration: d})
}

// Ramp moves the rate linearly from `from` to `to` over d.
func Ramp(from, to float64, d time.Duration) (Shape, error) {
	if err := checkRate("Rate", fmtRate(from), from, true); err != nil {
		return Shape{}, err
	}
	if err := checkRate("RampTo", fmtRate(to), to, true); err != nil {
		return Shape{}, err
	}
	return NewShape(Segment{From: from, To: to, Duration: d})
}

// Stepped holds each rate for d/len(rates).
func Stepped(rates []float64, d time.Duration) (Shape, error) {
	if len(rates) == 0 {
		return Shape{}, shapeErr("Steps", "", "are empty")
	}
	if len(rates) > MaxSegments {
		return Shape{}, shapeErr("Steps", fmt.Sprintf("(%d of them)", len(rates)), overBound(fmt.Sprintf("%d steps", MaxSegments)))
	}
	step := d / time.Duration(len(rates))
	segs := make([]Segment, len(rates))
	for i, r := range rates {
		if err := checkRate("Steps", fmt.Sprintf("step %d, %s,", i+1, fmtRate(r)), r, false); err != nil {
			return Shape{}, err
		}
		segs[i] = Segment{From: r, To: r, Duration: step}
	}
	return NewShape(segs...)
}

// Duration is the length of the timetable.
func (s Shape) Duration() time.Duration {
	if len(s.segs) == 0 {
		return 0
	}
	last := len(s.segs) - 1
	return s.start[last] + s.segs[last].Duration
}

// Count is the number of arrivals the timetable schedules: every i with
// i < the integral of the rate over the shape.
func (s Shape) Count() int64 {
	if s.total <= 0 {
		return 0
	}
	return int64(math.Ceil(s.total - 1e-9))
}

// MeanRate is Count over Duration, in requests per second.
func (s Shape) MeanRate() float64 {
	d := s.Duration().Seconds()
	if d == 0 {
		return 0
	}
	return s.total / d
}

// At is the offset from the window start at which arrival i is due: the time
// t where the integral of the rate from 0 to t equals i. i must be in
// [0, Count()).
func (s Shape) At(i int64) time.Duration {
	return s.at(float64(i))
}

// at is the offset at which the integral of the rate reaches n, for any n
// in [0, the shape's total): At for a whole n, and the time map of a
// Poisson process (see timetable) for any other.
func (s Shape) at(n float64) time.Duration {
	k := len(s.segs) - 1
	for j := 1; j < len(s.segs); j++ {
		if s.cum[j] > n {
			k = j - 1
			break
		}
	}
	g := s.segs[k]
	n -= s.cum[k]
	a := g.From
	b := (g.To - g.From) / g.Duration.Seconds()
	// Solve a*t + b*t^2/2 = n for t; this form is stable for b == 0 and b < 0.
	den := a + math.Sqrt(math.Max(a*a+2*b*n, 0))
	var t float64
	if den > 0 {
		t = 2 * n / den
	}
	return s.start[k] + time.Duration(t*float64(time.Second))
}

// rampParts is how many rows a linear ramp is reported in.
const rampParts = 10

// phase is a stretch of a window reported as its own row: one step of a
// stepped shape, or a tenth of a ramp.
type phase struct {
	start, end time.Duration // offsets in the window
	from, to   float64       // rate at start and end
}

// phases splits the timetable into the rows a report shows; nil for a
// constant rate, which is one row (the window) already.
func (s Shape) phases() []phase {
	switch {
	case len(s.segs) > 1:
		ps := make([]phase, len(s.segs))
		for i, g := range s.segs {
			ps[i] = phase{start: s.start[i], end: s.start[i] + g.Duration, from: g.From, to: g.To}
		}
		return ps
	case len(s.segs) == 1 && s.segs[0].From != s.segs[0].To:
		g := s.segs[0]
		ps := make([]phase, rampParts)
		for i := range ps {
			a := g.Duration * time.Duration(i) / rampParts
			b := g.Duration * time.Duration(i+1) / rampParts
			rate := func(t time.Duration) float64 {
				return g.From + (g.To-g.From)*t.Seconds()/g.Duration.Seconds()
			}
			ps[i] = phase{start: a, end: b, from: rate(a), to: rate(b)}
		}
		return ps
	}
	return nil
}
