package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Profile is a release gate: named cases, each a set of limits a report's
// windows must meet. Profiles are JSON:
//
//	{"name": "release", "cases": [{"name": "list-1200", "rate": 1200,
//	  "windows": 3, "duration": "60s", "workers": 48, "qps_floor": 1190,
//	  "p99_budget_ms": 100, "max_refusal_rate": 0, "max_error_rate": 0,
//	  "zero_drops": true}]}
type Profile struct {
	Name  string `json:"name"`
	Cases []Case `json:"cases"`
}

// Case is one named gate. The limits judge every window; a zero limit is
// "no limit" except where noted. The load fields are defaults for `sluice
// load --profile`; flags override them.
type Case struct {
	Name string `json:"name"`

	// QPSFloor is the minimum ok responses per second (0: none).
	QPSFloor float64 `json:"qps_floor,omitempty"`
	// P99BudgetMS is the response-time p99 budget in ms (0: none). Response
	// time runs from the scheduled time, so driver queueing counts.
	P99BudgetMS float64 `json:"p99_budget_ms,omitempty"`
	// MaxRefusalRate and MaxErrorRate are fractions of scheduled requests
	// (refused; http_error + transport_error + unfinished). Unlike the other
	// limits, zero here means "none allowed"; leave the field out
	// (or null) for no limit.
	MaxRefusalRate *float64 `json:"max_refusal_rate,omitempty"`
	MaxErrorRate   *float64 `json:"max_error_rate,omitempty"`
	// ZeroDrops requires that the driver dropped no arrival.
	ZeroDrops bool `json:"zero_drops,omitempty"`

	Rate        float64 `json:"rate,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	Workers     int     `json:"workers,omitempty"`
	Windows     int     `json:"windows,omitempty"`
	Duration    string  `json:"duration,omitempty"`
}

// ErrBadProfile reports a profile that cannot be used.
var ErrBadProfile = errors.New("load: bad profile")

// ParseProfile decodes and checks a profile: strict JSON (unknown fields are
// errors), at least one case, unique non-empty names, rates in [0, 1],
// non-negative numbers.
func ParseProfile(data []byte) (Profile, error) {
	var p Profile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Profile{}, fmt.Errorf("%w: %v", ErrBadProfile, err)
	}
	if dec.More() {
		return Profile{}, fmt.Errorf("%w: trailing data after the profile", ErrBadProfile)
	}
	if len(p.Cases) == 0 {
		return Profile{}, fmt.Errorf("%w: no cases", ErrBadProfile)
	}
	seen := map[string]bool{}
	for i, c := range p.Cases {
		if strings.TrimSpace(c.Name) == "" {
			return Profile{}, fmt.Errorf("%w: case %d has no name", ErrBadProfile, i)
		}
		if seen[c.Name] {
			return Profile{}, fmt.Errorf("%w: case %q appears twice", ErrBadProfile, c.Name)
		}
		seen[c.Name] = true
		bad := func(what string) error {
			return fmt.Errorf("%w: case %q: %s", ErrBadProfile, c.Name, what)
		}
		for _, v := range []float64{c.QPSFloor, c.P99BudgetMS, c.Rate} {
			if !(v >= 0) || math.IsInf(v, 0) {
				return Profile{}, bad("numbers must be finite and >= 0")
			}
		}
		for _, r := range []*float64{c.MaxRefusalRate, c.MaxErrorRate} {
			if r != nil && !(*r >= 0 && *r <= 1) {
				return Profile{}, bad("rates must be fractions in [0, 1]")
			}
		}
		if c.Concurrency < 0 || c.Workers < 0 || c.Windows < 0 {
			return Profile{}, bad("counts must be >= 0")
		}
		if c.Rate > MaxRate || c.Concurrency > MaxWorkers || c.Workers > MaxWorkers || c.Windows > MaxWindows {
			return Profile{}, bad(fmt.Sprintf("sizes over the bounds: rate at most %d, concurrency and workers at most %d, windows at most %d", MaxRate, MaxWorkers, MaxWindows))
		}
		if c.Rate > 0 && c.Concurrency > 0 {
			return Profile{}, bad("rate and concurrency are exclusive")
		}
		if c.Duration != "" {
			if d, err := time.ParseDuration(c.Duration); err != nil || d <= 0 || d > MaxWindowDuration {
				return Profile{}, bad(fmt.Sprintf("duration %q (must be > 0 and at most %v)", c.Duration, MaxWindowDuration))
			}
		}
	}
	return p, nil
}

// Case returns the case called name; with an empty name, the only case.
func (p Profile) Case(name string) (Case, error) {
	if name == "" {
		if len(p.Cases) == 1 {
			return p.Cases[0], nil
		}
		names := make([]string, len(p.Cases))
		for i, c := range p.Cases {
			names[i] = c.Name
		}
		return Case{}, fmt.Errorf("%w: profile has %d cases (%s): pick one with --case", ErrBadProfile, len(p.Cases), strings.Join(names, ", "))
	}
	for _, c := range p.Cases {
		if c.Name == name {
			return c, nil
		}
	}
	return Case{}, fmt.Errorf("%w: no case %q", ErrBadProfile, name)
}

// Judge judges every window of r against c and returns the verdict: INVALID
// when the run was interrupted or any window is driver-limited (the numbers
// cannot be trusted), FAIL with every reason when a limit is broken, PASS
// otherwise. A nil case only checks validity (status NONE when valid).
func Judge(r *Report, c *Case) Verdict {
	v := Verdict{Status: StatusPass, Reasons: []string{}, Windows: []WindowVerdict{}}
	if c == nil {
		v.Status = StatusNone
	} else {
		v.Case = c.Name
	}
	invalid, failed := false, false
	if r.Interrupted {
		invalid = true
		v.Reasons = append(v.Reasons, "run interrupted")
	}
	if r.Aborted != "" {
		failed = true
		v.Reasons = append(v.Reasons, "run aborted: "+r.Aborted)
	}
	windows := 0
	for si, st := range r.Steps {
		budget, maxLag, maxCPU := st.Settings.P99BudgetMS, st.Settings.MaxLagMS, st.Settings.MaxCPU
		if c != nil && c.P99BudgetMS > 0 {
			budget = c.P99BudgetMS
		}
		for _, w := range st.Windows {
			windows++
			wv := WindowVerdict{Step: si, Window: w.Index, Status: StatusPass, Reasons: []string{}}
			where := fmt.Sprintf("step %d (%s) window %d", si, st.Label, w.Index)
			if dl := driverLimits(w, budget, maxLag, maxCPU); len(dl) > 0 {
				wv.Status = StatusInvalid
				for _, s := range dl {
					wv.Reasons = append(wv.Reasons, "driver-limited: "+s)
				}
			}
			if c != nil {
				fails := judgeWindow(w, c)
				if len(fails) > 0 && wv.Status == StatusPass {
					wv.Status = StatusFail
				}
				wv.Reasons = append(wv.Reasons, fails...)
			} else if wv.Status == StatusPass {
				wv.Status = StatusNone
			}
			switch wv.Status {
			case StatusInvalid:
				invalid = true
			case StatusFail:
				failed = true
			}
			for _, s := range wv.Reasons {
				v.Reasons = append(v.Reasons, where+": "+s)
			}
			v.Windows = append(v.Windows, wv)
		}
	}
	if windows == 0 && !r.Interrupted {
		invalid = true
		v.Reasons = append(v.Reasons, "report has no windows")
	}
	switch {
	case invalid:
		v.Status = StatusInvalid
	case failed && c != nil:
		v.Status = StatusFail
	case failed:
		v.Status = StatusNone
	}
	return v
}

func judgeWindow(w Window, c *Case) []string {
	r := []string{}
	n := w.Counts
	if c.QPSFloor > 0 && w.Rates.OK < c.QPSFloor {
		r = append(r, fmt.Sprintf("ok rate %.1f/s below the floor %.1f/s", w.Rates.OK, c.QPSFloor))
	}
	if c.P99BudgetMS > 0 && w.Latency.ResponseTime.P99 > c.P99BudgetMS {
		r = append(r, fmt.Sprintf("response time p99 %.2f ms over the budget %.2f ms", w.Latency.ResponseTime.P99, c.P99BudgetMS))
	}
	if c.ZeroDrops && n.Dropped > 0 {
		r = append(r, fmt.Sprintf("%d dropped by the driver (zero required)", n.Dropped))
	}
	if n.Scheduled > 0 {
		sched := float64(n.Scheduled)
		if c.MaxRefusalRate != nil && float64(n.Refused)/sched > *c.MaxRefusalRate {
			r = append(r, fmt.Sprintf("refusal rate %.4f%% over the limit %.4f%% (%d refused)", 100*float64(n.Refused)/sched, 100**c.MaxRefusalRate, n.Refused))
		}
		errs := n.HTTPError + n.TransportError + n.Unfinished
		if c.MaxErrorRate != nil && float64(errs)/sched > *c.MaxErrorRate {
			r = append(r, fmt.Sprintf("error rate %.4f%% over the limit %.4f%% (%d errors)", 100*float64(errs)/sched, 100**c.MaxErrorRate, errs))
		}
	} else if c.QPSFloor > 0 {
		r = append(r, "nothing scheduled")
	}
	return r
}
