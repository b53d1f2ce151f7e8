package load

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
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

// MaxProfileBytes bounds a profile file: a profile is a few cases of
// limits, and a larger file is not one.
const MaxProfileBytes = 1 << 20

// ReadProfile reads and checks the profile at path (see ParseProfile) and
// returns it with its path and SHA-256, for a report to embed. Case is
// left empty for the caller to choose.
func ReadProfile(path string) (*ProfileRef, error) {
	b, err := readBounded(path, MaxProfileBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadProfile, err)
	}
	p, err := ParseProfile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(b)
	return &ProfileRef{Path: path, SHA256: hex.EncodeToString(sum[:]), Profile: p}, nil
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

// ErrCaseMismatch reports a report run against a case the profile given to
// judge it does not have: judging it by some other case would compare it
// with limits it was never meant to meet.
var ErrCaseMismatch = errors.New("load: the report's case is not in the profile")

// CaseFor picks the case of p that judges r: the case called name when
// name is given; otherwise the case r was run against, which p must have
// (ErrCaseMismatch when it does not); otherwise, for a report run without
// a profile, p's only case.
func (p Profile) CaseFor(r *Report, name string) (Case, error) {
	if name == "" && r.Profile != nil && r.Profile.Case != "" {
		c, err := p.Case(r.Profile.Case)
		if err != nil {
			names := make([]string, len(p.Cases))
			for i, c := range p.Cases {
				names[i] = c.Name
			}
			return Case{}, fmt.Errorf("%w: the report was run against case %q, and this profile has %s; name the case to judge it by (--case)",
				ErrCaseMismatch, r.Profile.Case, caseList(names))
		}
		return c, nil
	}
	return p.Case(name)
}

func caseList(names []string) string {
	if len(names) == 1 {
		return "only case " + strconv.Quote(names[0])
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return "cases " + strings.Join(q, ", ")
}

// StoredCase is the case a report was judged against when it was written,
// from the profile it embeds; nil when it was run without one.
func StoredCase(r *Report) (*Case, error) {
	if r.Profile == nil {
		return nil, nil
	}
	c, err := r.Profile.Profile.Case(r.Profile.Case)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// Rejudge replaces r's stored verdict with a fresh one, judged as Check
// judges it against the case r stores (its embedded profile's), and says
// so among the reasons when the two differ: a reader prints the verdict
// the report's figures give, not the one a file claims.
func Rejudge(r *Report) {
	stored := r.Verdict.Status
	c, err := StoredCase(r)
	if err != nil {
		c = nil // Validate refuses such a report; judge its validity alone
	}
	r.Verdict = Check(r, c, false)
	if r.Verdict.Status != stored {
		r.Verdict.Reasons = append(r.Verdict.Reasons, fmt.Sprintf("the report stored verdict %s; judged again, it is %s", stored, r.Verdict.Status))
	}
}

// Check is the one judgement every command gives a report (load when it
// writes one, check and report when they read one): Judge against c, and
// with release, also require the report to be release-qualified, judged
// from its own fields rather than its stored flag; a report that is not
// is INVALID unless it already FAILed.
func Check(r *Report, c *Case, release bool) Verdict {
	v := Judge(r, c)
	if !release {
		return v
	}
	why := ReleaseReasons(r)
	if r.Kind == "merge" && !r.ReleaseQualified {
		why = append(why, strings.Join(r.ReleaseReasons, "; "))
	}
	for _, s := range why {
		v.Reasons = append(v.Reasons, "not release-qualified: "+s)
		if v.Status != StatusFail {
			v.Status = StatusInvalid
		}
	}
	return v
}

// Judge judges every window of r against c and returns the verdict: FAIL
// when the run was aborted (the server left requests unanswered past the
// drain timeout), profile or not; else INVALID when the run was
// interrupted or any window is driver-limited (the numbers cannot be
// trusted); FAIL with every reason when a limit is broken; PASS otherwise.
// A nil case only checks validity (status NONE when valid).
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
	case r.Aborted != "":
		// The server left requests unanswered past the drain timeout:
		// a failure whatever the limits, and whatever the driver's lag
		// (which delays requests, it does not leave them hanging).
		v.Status = StatusFail
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
