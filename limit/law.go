package limit

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Window is what one sampling window saw, handed to a Law once per
// window. All durations are the window's measure (by default a quantile of
// the hold times of completions that produced a sample; see Config.Signal).
type Window struct {
	// Latency is the window's measure.
	Latency time.Duration
	// Mean is the mean of the window's hold times (0 when the measure comes
	// from a Signal). Unlike a quantile it moves with every queued request,
	// so it tells whether latency follows the limit.
	Mean time.Duration
	// Samples is how many completions fed the measure (0 when the measure
	// comes from a Signal).
	Samples int
	// Inflight is the most slots seen in use during the window.
	Inflight int64
	// Ceiling is what the law should aim Latency at, at most: with an SLO
	// (Config.SLO), 70% of the hold's budget (the SLO less the window's
	// queue wait); with a Signal, the SLO; 0 when there is none. A law must
	// never let its baseline rise above it.
	Ceiling time.Duration
	// Overload is true when Latency is above the SLO's budget for it. The
	// Adaptive forces a decrease in that case whatever the law proposes; a
	// law must not learn a baseline from such a window.
	Overload bool
}

// Law is a control law: from the current limit and what the last window
// saw, it proposes the next limit. The Adaptive that owns a Law calls it
// under its own lock, once per window, so a Law need not be safe for
// concurrent use; one Law value must not be shared by two Adaptives. The
// Adaptive applies the guardrails (min/max, the SLO ceiling, no growth
// while application-limited) to whatever the law proposes.
type Law interface {
	// Name is the law's short name for /state, metrics and logs.
	Name() string
	// Next proposes the limit after window w, given the current limit.
	Next(limit float64, w Window) float64
	// Baseline is the law's current idea of unloaded latency (0 if it has
	// none).
	Baseline() time.Duration
}

// capBaseline keeps a learned baseline at or below the fraction of the
// ceiling the law aims for, so that a long incident cannot teach the law
// that slow is normal.
func capBaseline(b time.Duration, ceiling time.Duration, tolerance float64) time.Duration {
	if ceiling <= 0 {
		return b
	}
	if limit := time.Duration(float64(ceiling) / tolerance); b > limit {
		return limit
	}
	return b
}

// AIMD is additive increase, multiplicative decrease: one more slot per
// healthy window, Backoff times the limit when the window's latency is
// above the threshold. It is the simplest law and a good default when an
// explicit latency target is known.
//
// The zero value is usable: Increase 1, Backoff 0.9, Threshold 1.5 times
// the learned baseline (capped by the SLO ceiling). Not safe for concurrent
// use (see Law).
type AIMD struct {
	// Increase is added per healthy window. 0 means 1; negative means 1.
	Increase float64
	// Backoff multiplies the limit after a slow window. 0 (or outside
	// (0,1)) means 0.9.
	Backoff float64
	// Threshold is the latency above which a window counts as slow. 0 means
	// 1.5 times the learned baseline, the lowest window latency of the last
	// one to two hundred windows; with an SLO the threshold never exceeds
	// the ceiling.
	Threshold time.Duration

	base    time.Duration
	minimum windowedMin
}

// Name implements Law.
func (*AIMD) Name() string { return "aimd" }

// Baseline implements Law: the learned unloaded latency (0 before any).
func (a *AIMD) Baseline() time.Duration { return a.base }

// Next implements Law.
func (a *AIMD) Next(limit float64, w Window) float64 {
	if !w.Overload {
		a.minimum.observe(w.Latency, 100)
		a.minimum.follow(limit, w)
	}
	a.base = capBaseline(a.minimum.value(), w.Ceiling, 1.5)
	threshold := a.Threshold
	if threshold <= 0 {
		threshold = a.base + a.base/2
	}
	if w.Ceiling > 0 && (threshold <= 0 || threshold > w.Ceiling) {
		threshold = w.Ceiling
	}
	if w.Overload || (threshold > 0 && w.Latency > threshold) {
		backoff := a.Backoff
		if backoff <= 0 || backoff >= 1 {
			backoff = 0.9
		}
		return limit * backoff
	}
	inc := a.Increase
	if inc <= 0 {
		inc = 1
	}
	return limit + inc
}

// Vegas estimates the queue the limit builds, limit × (1 − baseline /
// latency), and keeps it between Alpha and Beta slots: below Alpha the
// limit grows, above Beta it shrinks, by log10(limit) slots a window
// (at least one). The baseline is the lowest window latency of the last one
// to two Probe periods, so it follows a backend that got slower for good
// within two periods. (Resetting it to the current latency, as the
// original probe does, adopts a loaded latency as the new baseline and
// lets the limit climb; a windowed minimum keeps the unloaded latency the
// limit sees each time it dips to the knee.)
//
// The zero value is usable: Alpha 3·log10(limit) (at least 2), Beta
// 6·log10(limit) (at least 4), Probe 100 windows. Not safe for concurrent
// use (see Law).
type Vegas struct {
	// Alpha and Beta bound the tolerated queue, in slots, as functions of
	// the limit. Nil means the defaults above.
	Alpha, Beta func(limit float64) float64
	// Probe is the period, in windows, of the baseline's windowed minimum.
	// 0 means 100; negative means the baseline never rises.
	Probe int

	base    time.Duration
	minimum windowedMin
}

// Name implements Law.
func (*Vegas) Name() string { return "vegas" }

// Baseline implements Law.
func (v *Vegas) Baseline() time.Duration { return v.base }

// windowedMin is the lowest latency seen over the last one to two periods
// of a given number of windows: it follows a latency that fell at once and
// one that rose for good within two periods, and it never adopts a loaded
// latency as long as the limit keeps dipping to the backend's knee (where
// latency is unloaded) at least once a period.
type windowedMin struct {
	cur, prev time.Duration
	windows   int

	// The limit and mean latency when the limit last rose or the mean last
	// moved by more than a twentieth, for follow.
	refLimit float64
	refMean  time.Duration
}

// follow re-anchors the minimum at the window's mean latency when the
// limit has fallen by a quarter since the mean latency last rose or fell (by a
// twentieth) and the mean has not fallen with it. A queue the limit builds
// shrinks as the limit shrinks, and the mean with it; a mean that stays
// put is a backend that got slower, and the old minimum, taken as unloaded
// latency, would cut the limit to its floor (and the backend's throughput
// with it) until a period or two had passed. (The mean, not the quantile:
// with a fixed service time a 90th percentile is one or two service times
// whatever the queue, as long as more than a tenth of requests queue; and
// a window with a few queued requests must not re-anchor at their wait.)
// Called on windows that are not overloaded only, after observe. It does
// nothing without an SLO ceiling (which bounds what a re-anchored baseline
// may be: without one, a baseline that rises is the drift the ceiling
// exists to stop) or without a mean (a Signal's window).
func (m *windowedMin) follow(limit float64, w Window) {
	mean, d := w.Mean, w.Latency
	switch {
	case w.Ceiling <= 0 || mean <= 0 || d <= 0:
	case m.refLimit == 0 || limit >= m.refLimit || mean > m.refMean || mean < m.refMean-m.refMean/20:
		m.refLimit, m.refMean = limit, mean
	case limit <= 0.75*m.refLimit:
		m.cur, m.prev = mean, mean
		m.refLimit, m.refMean = limit, mean
	}
}

// observe records one window's latency; period < 0 never forgets.
func (m *windowedMin) observe(d time.Duration, period int) {
	if d > 0 && (m.cur == 0 || d < m.cur) {
		m.cur = d
	}
	m.windows++
	if period > 0 && m.windows%period == 0 {
		m.prev, m.cur = m.cur, 0
	} else if period < 0 {
		m.prev = m.value()
	}
}

func (m *windowedMin) value() time.Duration { return minPositive(m.prev, m.cur) }

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

func log10Floor(limit float64, factor, least float64) float64 {
	return math.Max(least, factor*math.Log10(math.Max(limit, 1)))
}

// Next implements Law.
func (v *Vegas) Next(limit float64, w Window) float64 {
	probe := v.Probe
	if probe == 0 {
		probe = 100
	}
	if !w.Overload {
		v.minimum.observe(w.Latency, probe)
		v.minimum.follow(limit, w)
	}
	v.base = v.minimum.value()
	v.base = capBaseline(v.base, w.Ceiling, 2)
	if w.Latency <= 0 || v.base <= 0 {
		return limit
	}
	queue := limit * (1 - float64(v.base)/float64(w.Latency))
	alpha, beta := log10Floor(limit, 3, 2), log10Floor(limit, 6, 4)
	if v.Alpha != nil {
		alpha = v.Alpha(limit)
	}
	if v.Beta != nil {
		beta = v.Beta(limit)
	}
	step := log10Floor(limit, 1, 1)
	switch {
	case w.Overload || queue > beta:
		return limit - step
	case queue < alpha:
		return limit + step
	}
	return limit
}

// Gradient2 compares a short-term latency (this window) with a long-term
// one: the gradient Tolerance × long / short, clamped to [0.5, 1], scales
// the limit down as latency rises, and a headroom of √limit lets it grow
// while latency holds. The new limit is blended with the old by Smoothing,
// so one window cannot swing it.
//
// In the original the long-term latency is an average of recent samples,
// so it follows a sustained slowdown up, and the limit with it: under a
// steady modest overload the average catches up with the queueing latency,
// the gradient returns to 1 and the headroom grows the limit without end
// (the drift users of the original report). Here the long-term latency is
// the lowest window latency of the last one to two LongWindows periods:
// while the limit keeps dipping to the backend's knee, where latency is
// unloaded, it stays put; a backend that got slower for good is accepted
// within two periods. It never learns from an overloaded window and never
// rises above Ceiling / Tolerance. The √limit headroom is added only while
// the gradient is 1; with it, a gradient near 0.8 still lets the limit
// creep up.
//
// The zero value is usable: Tolerance 1.5, Smoothing 0.2, LongWindows 100.
// Not safe for concurrent use (see Law).
type Gradient2 struct {
	// Tolerance is how much slower than the long-term latency a window may
	// be before the limit shrinks. 0 (or below 1) means 1.5.
	Tolerance float64
	// Smoothing is the weight of the new limit against the old, in (0,1].
	// 0 (or outside) means 0.2.
	Smoothing float64
	// LongWindows is the period of the long-term latency's windowed
	// minimum, in windows. 0 means 100; negative means it never rises.
	LongWindows int

	long    time.Duration
	minimum windowedMin
}

// Name implements Law.
func (*Gradient2) Name() string { return "gradient2" }

// Baseline implements Law: the long-term latency.
func (g *Gradient2) Baseline() time.Duration { return g.long }

// Next implements Law.
func (g *Gradient2) Next(limit float64, w Window) float64 {
	tol := g.Tolerance
	if tol < 1 {
		tol = 1.5
	}
	smooth := g.Smoothing
	if smooth <= 0 || smooth > 1 {
		smooth = 0.2
	}
	period := g.LongWindows
	if period == 0 {
		period = 100
	}
	if w.Latency <= 0 {
		return limit
	}
	if !w.Overload {
		g.minimum.observe(w.Latency, period)
		g.minimum.follow(limit, w)
	}
	g.long = g.minimum.value()
	g.long = capBaseline(g.long, w.Ceiling, tol)
	if g.long <= 0 {
		return limit
	}
	gradient := math.Max(0.5, math.Min(1, tol*float64(g.long)/float64(w.Latency)))
	next := limit*gradient + math.Sqrt(limit)
	if gradient < 1 {
		// Headroom only while latency holds; a shrinking limit must shrink.
		next = limit * gradient
	}
	return (1-smooth)*limit + smooth*next
}

// ErrUnknownLaw is wrapped by ParseLaw's error for a name it does not know.
var ErrUnknownLaw = errors.New("limit: unknown law")

// LawNames returns the names ParseLaw accepts, in a fixed order.
func LawNames() []string { return []string{"aimd", "vegas", "gradient2"} }

// ParseLaw returns a new Law with its defaults for a name from LawNames
// (case-insensitive, surrounding spaces ignored), for flags such as
// --limit. Any other name, "fixed" included (a fixed gate has no law), is
// an error wrapping ErrUnknownLaw that lists the valid names.
func ParseLaw(name string) (Law, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "aimd":
		return &AIMD{}, nil
	case "vegas":
		return &Vegas{}, nil
	case "gradient2":
		return &Gradient2{}, nil
	}
	return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknownLaw, name, strings.Join(LawNames(), ", "))
}
