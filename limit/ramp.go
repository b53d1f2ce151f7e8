package limit

import (
	"math"
	"time"
)

// rampState is the recovery ramp: capacity climbs from floor to target in
// steps, each held for a hold period and judged on completions, latency
// and queue age. Guarded by Adaptive.mu.
type rampState struct {
	active        bool
	level, steps  int
	floor, target float64
	refLatency    time.Duration // latency when the ramp began
	since         time.Time     // current level's start
	completed     int           // completions since the level began
	queueAge      time.Duration // queue age at the last judgement
	rates         []float64     // completions per second measured at each level
	decision      Decision
	why           string
}

func (r *rampState) start(now time.Time, floor, target float64, lat time.Duration, steps int) {
	rates := r.rates[:0]
	*r = rampState{active: true, steps: steps, floor: floor, target: target, refLatency: lat,
		since: now, decision: DecisionRampStart, why: "episode_over"}
	r.rates = append(rates, make([]float64, steps+1)...)
}

func (r *rampState) abort(now time.Time, why string) {
	r.active, r.decision, r.why, r.since = false, DecisionRampAbort, why, now
}

// back steps the ramp down one level at once and starts the level's hold
// afresh.
func (r *rampState) back(now time.Time, why string) {
	if r.level > 0 {
		r.level--
	}
	r.decision, r.why, r.since, r.completed = DecisionRampBack, why, now, 0
}

func (r *rampState) capacity() float64 { return r.levelCapacity(r.level) }

// levelCapacity is the capacity at a level (the floor below level 0).
func (r *rampState) levelCapacity(level int) float64 {
	return r.floor + (r.target-r.floor)*float64(max(level, 0))/float64(r.steps)
}

// window accounts one window and, once the level has been held long
// enough, judges it. It returns DecisionNone while the level is held.
func (r *rampState) window(now time.Time, lat time.Duration, completed int, queueAge time.Duration, cfg settings) (Decision, string) {
	r.completed += completed
	held := now.Sub(r.since)
	if held < cfg.hold {
		return DecisionNone, ""
	}
	rate := float64(r.completed) / held.Seconds()
	d, why := r.judge(rate, lat, queueAge, cfg.gain)
	switch d {
	case DecisionRampGrow:
		r.rates[r.level] = rate
		r.level++
		if r.level >= r.steps {
			r.active, d, why = false, DecisionRampDone, "target_reached"
		}
	case DecisionRampBack:
		if r.level > 0 {
			r.level--
		}
	case DecisionRampPause:
		r.rates[r.level] = math.Max(r.rates[r.level], rate)
	}
	r.decision, r.why, r.since, r.completed, r.queueAge = d, why, now, 0, queueAge
	return d, why
}

func (r *rampState) judge(rate float64, lat, queueAge time.Duration, gain float64) (Decision, string) {
	ref := float64(r.refLatency)
	switch {
	case ref > 0 && float64(lat) > 2*ref:
		return DecisionRampBack, "latency_rose"
	case queueAge > 0 && r.queueAge > 0 && queueAge > 2*r.queueAge:
		return DecisionRampBack, "queue_age_rose"
	}
	if r.level == 0 {
		// Nothing below to compare with: the floor's rate is the reference.
		return DecisionRampGrow, "floor_measured"
	}
	prev := r.rates[r.level-1]
	falling, rising := rate < prev*(1-gain), rate >= prev*(1+gain)
	switch {
	case falling:
		return DecisionRampBack, "completions_fell"
	case ref > 0 && float64(lat) > 1.25*ref:
		return DecisionRampPause, "latency_rising"
	case !rising:
		return DecisionRampPause, "completions_flat"
	}
	return DecisionRampGrow, "completions_rose"
}

func (r *rampState) snapshot(steps int) RampState {
	s := RampState{Active: r.active, Level: r.level, Steps: steps, Decision: r.decision, Why: r.why, Since: r.since}
	if r.steps > 0 {
		s.Steps = r.steps
		s.Floor, s.Target = int64(math.Round(r.floor)), int64(math.Round(r.target))
		s.Capacity = int64(math.Round(r.capacity()))
	}
	return s
}
