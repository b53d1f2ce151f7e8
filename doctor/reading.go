package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/internal/promtext"
)

// Metric names doctor reads. The admission families are what
// promsluice.Metrics exports; the others are read when present.
const (
	MetricOffered   = metricname.AdmissionOffered   // {gate,kind}
	MetricAdmitted  = metricname.AdmissionAdmitted  // {gate,kind}
	MetricRejected  = metricname.AdmissionRejected  // {gate,kind,reason[,class]}
	MetricCompleted = metricname.AdmissionCompleted // {gate,kind,outcome}
	MetricInflight  = metricname.AdmissionInflight  // {gate}
	MetricWaiting   = metricname.AdmissionWaiting   // {gate}
	MetricCapacity  = metricname.AdmissionCapacity  // {gate}
	MetricMisuse    = metricname.AdmissionMisuse    // {gate}
	MetricHold      = metricname.AdmissionHold      // histogram {gate,kind}
	MetricWait      = metricname.AdmissionWait      // histogram {gate,kind}
	// MetricOldestWait is the age of the oldest queued caller, in seconds,
	// per gate: read when a gate exports it.
	MetricOldestWait = metricname.AdmissionOldestWait
	// MetricRetryAttempts and MetricRetryRetries are a retry policy's
	// attempts (the first included) and retries, as promsluice exports
	// them, with matching labels: read when exported. Every attempt is an
	// original's first or follows a retry, so originals are attempts
	// less retries (a retry whose caller left before its attempt makes
	// that a little short, the ratio a little high).
	MetricRetryAttempts = metricname.RetryAttempts
	MetricRetryRetries  = metricname.RetryRetries
)

// families are the families ParseMetrics reads, with the kinds
// internal/metricname lists.
var families = metricname.Families(
	MetricOffered, MetricAdmitted, MetricRejected, MetricCompleted, MetricMisuse,
	MetricInflight, MetricWaiting, MetricCapacity, MetricOldestWait,
	MetricHold, MetricWait, MetricRetryAttempts, MetricRetryRetries,
)

// ErrBadInput is wrapped by every error for metrics, state or a goroutine
// profile that cannot be parsed.
var ErrBadInput = errors.New("doctor: unreadable input")

// maxInput bounds what doctor reads from one endpoint.
const maxInput = 32 << 20

// Reading is one look at a server: its admission gates and retry counters
// at one moment. The zero value is an empty reading (no gates). A Reading
// is not modified after it is built; sharing one between goroutines is
// safe.
type Reading struct {
	At    time.Time
	Gates map[string]*GateReading // by gate name
	// Retries are the retry counters by label set ("" when unlabelled).
	Retries map[string]RetryCounts
	// Families records which of the metric families above were present.
	Families map[string]bool
	// State is the /state document, when it was read.
	State *State
}

// GateReading is one gate's counters and gauges. Counters are totals since
// the gate started; gauges are values at the reading.
type GateReading struct {
	Gate      string
	Offered   float64
	Admitted  float64
	Rejected  float64 // all reasons
	Completed float64 // all outcomes
	Misuse    float64
	Inflight  float64
	Waiting   float64
	Capacity  float64
	// OldestWait is the oldest waiter's age in seconds; nil when not
	// exported.
	OldestWait *float64
	// HoldSum/HoldCount and WaitSum/WaitCount are the histograms' sums
	// (seconds) and counts; zero when not exported.
	HoldSum, HoldCount float64
	WaitSum, WaitCount float64
	// Slices break the offered and rejected counters down by kind, reason
	// and class (class is "" when not labelled).
	Slices []Slice
}

// Slice is the offered and refused counts of one kind, reason and class of
// a gate. Offered is only known per kind and class: refusals for the same
// kind with different reasons share it.
type Slice struct {
	Kind, Reason, Class string
	Offered             float64 // offered for this kind and class (all reasons)
	Rejected            float64
}

// RetryCounts are a retry policy's totals: attempts (the first
// included) and retries as exported, and the originals they imply
// (attempts less retries).
type RetryCounts struct {
	Originals, Attempts, Retries float64
}

// State is what doctor reads of a sluice server's /state (server.State);
// unknown fields are ignored.
type State struct {
	Draining bool        `json:"draining"`
	Gates    []StateGate `json:"gates"`
}

// StateGate is one gate of /state.
type StateGate struct {
	Gate       string            `json:"gate"`
	Capacity   float64           `json:"capacity"`
	Closed     bool              `json:"closed"`
	Offered    float64           `json:"offered"`
	Admitted   float64           `json:"admitted"`
	Rejected   map[string]uint64 `json:"rejected"`
	Completed  map[string]uint64 `json:"completed"`
	Inflight   float64           `json:"inflight"`
	Waiting    float64           `json:"waiting"`
	OldestWait *float64          `json:"oldest_wait_seconds,omitempty"`
}

// ParseState decodes a /state document.
func ParseState(r io.Reader) (*State, error) {
	var s State
	dec := json.NewDecoder(io.LimitReader(r, maxInput))
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: state: %v", ErrBadInput, err)
	}
	for _, g := range s.Gates {
		for _, v := range []float64{g.Capacity, g.Offered, g.Admitted, g.Inflight, g.Waiting} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%w: state: gate %q has a non-finite figure", ErrBadInput, g.Gate)
			}
		}
	}
	return &s, nil
}

// ParseMetrics reads Prometheus text exposition into a Reading taken at
// at. Families it does not know are ignored. The families it reads follow
// one rule, the one `sluice load --metrics` follows too: each must have
// the type promsluice gives it (or none), and every sample, histogram sums
// and counts included, must be finite and 0 or more; anything else is an
// error wrapping ErrBadInput that names the series.
func ParseMetrics(r io.Reader, at time.Time) (*Reading, error) {
	fams, err := promtext.Parse(r, families...)
	if err != nil {
		return nil, fmt.Errorf("%w: metrics: %v", ErrBadInput, err)
	}
	rd := &Reading{At: at, Gates: map[string]*GateReading{}, Retries: map[string]RetryCounts{}, Families: map[string]bool{}}
	gate := func(name string) *GateReading {
		g := rd.Gates[name]
		if g == nil {
			g = &GateReading{Gate: name}
			rd.Gates[name] = g
		}
		return g
	}
	type sliceKey struct{ gate, kind, reason, class string }
	type offKey struct{ gate, kind, class string }
	offered := map[offKey]float64{}
	rejected := map[sliceKey]float64{}
	each := func(name string, f func(labels map[string]string, s promtext.Sample)) {
		samples, ok := fams[name]
		if !ok {
			return
		}
		rd.Families[name] = true
		for _, s := range samples {
			f(s.Labels, s)
		}
	}
	each(MetricOffered, func(l map[string]string, s promtext.Sample) {
		gate(l["gate"]).Offered += s.Value
		offered[offKey{l["gate"], l["kind"], l["class"]}] += s.Value
	})
	each(MetricAdmitted, func(l map[string]string, s promtext.Sample) { gate(l["gate"]).Admitted += s.Value })
	each(MetricRejected, func(l map[string]string, s promtext.Sample) {
		gate(l["gate"]).Rejected += s.Value
		rejected[sliceKey{l["gate"], l["kind"], l["reason"], l["class"]}] += s.Value
	})
	each(MetricCompleted, func(l map[string]string, s promtext.Sample) { gate(l["gate"]).Completed += s.Value })
	each(MetricMisuse, func(l map[string]string, s promtext.Sample) { gate(l["gate"]).Misuse += s.Value })
	each(MetricInflight, func(l map[string]string, s promtext.Sample) { gate(l["gate"]).Inflight += s.Value })
	each(MetricWaiting, func(l map[string]string, s promtext.Sample) { gate(l["gate"]).Waiting += s.Value })
	each(MetricCapacity, func(l map[string]string, s promtext.Sample) { gate(l["gate"]).Capacity += s.Value })
	each(MetricOldestWait, func(l map[string]string, s promtext.Sample) {
		g := gate(l["gate"])
		if v := s.Value; g.OldestWait == nil || v > *g.OldestWait {
			g.OldestWait = &v
		}
	})
	each(MetricHold, func(l map[string]string, s promtext.Sample) {
		g := gate(l["gate"])
		g.HoldSum += s.Value
		g.HoldCount += s.Count
	})
	each(MetricWait, func(l map[string]string, s promtext.Sample) {
		g := gate(l["gate"])
		g.WaitSum += s.Value
		g.WaitCount += s.Count
	})
	for _, name := range []string{MetricRetryAttempts, MetricRetryRetries} {
		each(name, func(l map[string]string, s promtext.Sample) {
			k := labelKey(l)
			c := rd.Retries[k]
			if name == MetricRetryRetries {
				c.Retries += s.Value
			} else {
				c.Attempts += s.Value
			}
			rd.Retries[k] = c
		})
	}
	for k, c := range rd.Retries {
		c.Originals = max(0, c.Attempts-c.Retries)
		rd.Retries[k] = c
	}
	for k, v := range rejected {
		g := gate(k.gate)
		g.Slices = append(g.Slices, Slice{Kind: k.kind, Reason: k.reason, Class: k.class, Rejected: v,
			Offered: offered[offKey{k.gate, k.kind, k.class}]})
	}
	for _, g := range rd.Gates {
		sort.Slice(g.Slices, func(i, j int) bool {
			a, b := g.Slices[i], g.Slices[j]
			if a.Kind != b.Kind {
				return a.Kind < b.Kind
			}
			if a.Class != b.Class {
				return a.Class < b.Class
			}
			return a.Reason < b.Reason
		})
	}
	return rd, nil
}

// labelKey is a stable text form of a label set: name="value",...
func labelKey(l map[string]string) string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", n, l[n])
	}
	return b.String()
}

// gateNames returns the reading's gate names, sorted.
func (r *Reading) gateNames() []string {
	names := make([]string, 0, len(r.Gates))
	for n := range r.Gates {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
