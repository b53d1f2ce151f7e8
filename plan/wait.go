package plan

import (
	"fmt"
	"math"
)

// MaxSlots bounds Wait's slots and the offered load: the Erlang C
// recursion takes one step per slot, and no gate has more.
const MaxSlots = 1_000_000

// WaitQuantile is the quantile of the wait Wait reports: the 99th
// percentile.
const WaitQuantile = 0.99

// Wait is the input of a waiting-time calculation for one queue in front
// of c slots (M/M/c): arrivals form a Poisson process at Rate, each item
// holds one slot for a service time drawn from an exponential
// distribution of mean ServiceTime, and items wait in one FIFO queue for
// the first free slot. Real service times with less spread wait less than
// this; bursts beyond Poisson, and slow items, wait more.
//
// Zero means "not given" for every field; negative, NaN and infinite
// values are refused.
type Wait struct {
	// Slots is c, the slots serving the queue. Required unless
	// TargetP99Wait is given; then zero means "find the fewest".
	Slots int64
	// ServiceTime is the mean time an item holds its slot, in seconds.
	// Required.
	ServiceTime float64
	// Rate is λ, the arrivals per second. Required.
	Rate float64
	// TargetP99Wait, when given, is the longest acceptable p99 wait in
	// seconds: the result then says how many slots meet it.
	TargetP99Wait float64
}

// WaitResult is the waiting time of an M/M/c queue.
type WaitResult struct {
	// Slots is the c the figures are for: the one given, or (without
	// one) the slots needed for the target.
	Slots int64 `json:"slots"`
	// Load is the offered load a = λ × service time, in slots busy on
	// average; Utilization is a / c.
	Load        float64 `json:"offered_load"`
	Utilization float64 `json:"utilization"`
	// Stable is false when a ≥ c: more work arrives than the slots can
	// do, and the queue grows without bound. The wait figures are then
	// zero: there is no steady state to describe.
	Stable bool `json:"stable"`
	// PWait is the probability that an arrival finds every slot busy and
	// waits (Erlang's C formula).
	PWait float64 `json:"p_wait"`
	// MeanWait and P99Wait are the mean and 99th percentile of the time
	// from arrival to the start of service, in seconds; most items wait
	// not at all, so the p99 is 0 when PWait is at most 1 %.
	MeanWait float64 `json:"mean_wait_seconds"`
	P99Wait  float64 `json:"p99_wait_seconds"`
	// MeanInSystem and P99InSystem are the same for the time from
	// arrival to completion (wait plus service): what a load driver
	// reports as response time.
	MeanInSystem float64 `json:"mean_in_system_seconds"`
	P99InSystem  float64 `json:"p99_in_system_seconds"`
	// NeededSlots is the fewest slots whose p99 wait is at most
	// TargetP99Wait; zero without a target. MeetsTarget says whether
	// Slots does.
	NeededSlots int64 `json:"slots_needed,omitempty"`
	MeetsTarget bool  `json:"meets_target"`
}

// Solve computes the waits.
func (in Wait) Solve() (WaitResult, error) {
	for _, f := range []struct {
		name string
		v    float64
	}{{"service-time", in.ServiceTime}, {"rate", in.Rate}, {"target-p99-wait", in.TargetP99Wait}} {
		if err := checkFigure(f.name, f.v); err != nil {
			return WaitResult{}, err
		}
	}
	switch {
	case in.Slots < 0 || in.Slots > MaxSlots:
		return WaitResult{}, invalid("slots", float64(in.Slots), fmt.Sprintf("must be 1 to %d", MaxSlots))
	case in.Slots == 0 && in.TargetP99Wait == 0:
		return WaitResult{}, invalid("slots", 0, "required: how many slots serve the queue (or give target-p99-wait to find out)")
	case in.ServiceTime == 0:
		return WaitResult{}, invalid("service-time", 0, "required: the mean time an item holds its slot")
	case in.Rate == 0:
		return WaitResult{}, invalid("rate", 0, "required: the arrivals per second")
	}
	a := in.Rate * in.ServiceTime
	if a > MaxSlots {
		return WaitResult{}, invalid("rate", in.Rate, fmt.Sprintf("with this service time the offered load is %s slots busy on average, more than %d; check the units", figure(a), MaxSlots))
	}
	r := WaitResult{Slots: in.Slots, Load: a}
	if in.TargetP99Wait > 0 {
		r.NeededSlots = slotsFor(a, in.ServiceTime, in.TargetP99Wait)
		if r.NeededSlots > MaxSlots {
			return WaitResult{}, invalid("target-p99-wait", in.TargetP99Wait, fmt.Sprintf("no queue of at most %d slots meets it", MaxSlots))
		}
		if r.Slots == 0 {
			r.Slots = r.NeededSlots
		}
		r.MeetsTarget = r.Slots >= r.NeededSlots
	}
	c := float64(r.Slots)
	r.Utilization = a / c
	if a >= c {
		return r, nil // unstable: no steady state
	}
	r.Stable = true
	mu := 1 / in.ServiceTime
	r.PWait = erlangC(r.Slots, a)
	theta := c*mu - in.Rate // the rate at which a waiting item's wait ends
	r.MeanWait = r.PWait / theta
	r.P99Wait = waitQuantile(r.PWait, theta, WaitQuantile)
	r.MeanInSystem = r.MeanWait + in.ServiceTime
	r.P99InSystem = systemQuantile(r.PWait, theta, mu, WaitQuantile)
	return r, nil
}

// erlangC is the probability of waiting in an M/M/c queue with offered
// load a < c, from Erlang's B formula by its recursion B(k) = a·B(k−1) /
// (k + a·B(k−1)), which stays finite for any c (factorials do not).
func erlangC(c int64, a float64) float64 {
	b := 1.0
	for k := int64(1); k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	rho := a / float64(c)
	return b / (1 - rho*(1-b))
}

// waitQuantile is the q-quantile of the wait: P(wait > t) = pWait·e^(−θt).
func waitQuantile(pWait, theta, q float64) float64 {
	if pWait <= 1-q {
		return 0
	}
	return math.Log(pWait/(1-q)) / theta
}

// systemQuantile is the q-quantile of the time in system, wait plus an
// exponential service at rate mu, found by bisection on
//
//	P(T > t) = (1 − C)·e^(−μt) + C·P(W + S > t),
//	P(W + S > t) = e^(−θt)·(1 + θ·(1 − e^(−(μ−θ)t)) / (μ − θ)),
//
// for a wait W ~ Exp(θ) and service S ~ Exp(μ) (written with expm1 so
// that it holds as θ approaches μ).
func systemQuantile(pWait, theta, mu, q float64) float64 {
	tail := func(t float64) float64 {
		d := mu - theta
		f := t
		if d != 0 {
			f = -math.Expm1(-d*t) / d
		}
		return (1-pWait)*math.Exp(-mu*t) + pWait*math.Exp(-theta*t)*(1+theta*f)
	}
	lo, hi := 0.0, 1/mu
	for tail(hi) > 1-q {
		lo, hi = hi, 2*hi
	}
	for range 200 {
		mid := (lo + hi) / 2
		if tail(mid) > 1-q {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo <= 1e-12*hi {
			break
		}
	}
	return hi
}

// slotsFor is the fewest slots whose p99 wait is at most target, for an
// offered load a (MaxSlots+1 when none up to MaxSlots does). The p99 wait
// falls as slots are added, so the first that meets the target is the
// answer; Erlang B is carried from one count to the next.
func slotsFor(a, service, target float64) int64 {
	mu := 1 / service
	rate := a * mu
	b := 1.0
	for k := int64(1); k <= MaxSlots; k++ {
		b = a * b / (float64(k) + a*b)
		c := float64(k)
		if a >= c {
			continue
		}
		pWait := b / (1 - a/c*(1-b))
		if waitQuantile(pWait, c*mu-rate, WaitQuantile) <= target {
			return k
		}
	}
	return MaxSlots + 1
}
