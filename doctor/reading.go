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

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names doctor reads. The admission families are what
// promsluice.Metrics exports; the others are read when present.
const (
	MetricOffered   = "sluice_admission_offered_total"   // {gate,kind}
	MetricAdmitted  = "sluice_admission_admitted_total"  // {gate,kind}
	MetricRejected  = "sluice_admission_rejected_total"  // {gate,kind,reason[,class]}
	MetricCompleted = "sluice_admission_completed_total" // {gate,kind,outcome}
	MetricInflight  = "sluice_admission_inflight"        // {gate}
	MetricWaiting   = "sluice_admission_waiting"         // {gate}
	MetricCapacity  = "sluice_admission_capacity"        // {gate}
	MetricMisuse    = "sluice_admission_misuse_total"    // {gate}
	MetricHold      = "sluice_admission_hold_seconds"    // histogram {gate,kind}
	MetricWait      = "sluice_admission_wait_seconds"    // histogram {gate}
	// MetricOldestWait is the age of the oldest queued caller, in seconds,
	// per gate: read when a gate exports it.
	MetricOldestWait = "sluice_admission_oldest_wait_seconds"
	// MetricRetryOriginals and MetricRetryAttempts count a retrying
	// client's original requests and every attempt it made (the first
	// included), with matching labels: read when exported.
	MetricRetryOriginals = "sluice_retry_originals_total"
	MetricRetryAttempts  = "sluice_retry_attempts_total"
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

// RetryCounts are a retrying client's totals.
type RetryCounts struct {
	Originals, Attempts float64
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
// at. Families it does not know are ignored; a sample with a NaN or
// infinite value in a family it reads is an error.
func ParseMetrics(r io.Reader, at time.Time) (*Reading, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(r, maxInput))
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
	var bad error
	each := func(name string, f func(labels map[string]string, v float64, m *dto.Metric)) {
		fam := fams[name]
		if fam == nil {
			return
		}
		rd.Families[name] = true
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			v := sampleValue(m)
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				if bad == nil {
					bad = fmt.Errorf("%w: metrics: %s%v has value %v", ErrBadInput, name, labels, v)
				}
				continue
			}
			f(labels, v, m)
		}
	}
	each(MetricOffered, func(l map[string]string, v float64, _ *dto.Metric) {
		gate(l["gate"]).Offered += v
		offered[offKey{l["gate"], l["kind"], l["class"]}] += v
	})
	each(MetricAdmitted, func(l map[string]string, v float64, _ *dto.Metric) { gate(l["gate"]).Admitted += v })
	each(MetricRejected, func(l map[string]string, v float64, _ *dto.Metric) {
		gate(l["gate"]).Rejected += v
		rejected[sliceKey{l["gate"], l["kind"], l["reason"], l["class"]}] += v
	})
	each(MetricCompleted, func(l map[string]string, v float64, _ *dto.Metric) { gate(l["gate"]).Completed += v })
	each(MetricMisuse, func(l map[string]string, v float64, _ *dto.Metric) { gate(l["gate"]).Misuse += v })
	each(MetricInflight, func(l map[string]string, v float64, _ *dto.Metric) { gate(l["gate"]).Inflight += v })
	each(MetricWaiting, func(l map[string]string, v float64, _ *dto.Metric) { gate(l["gate"]).Waiting += v })
	each(MetricCapacity, func(l map[string]string, v float64, _ *dto.Metric) { gate(l["gate"]).Capacity += v })
	each(MetricOldestWait, func(l map[string]string, v float64, _ *dto.Metric) {
		g := gate(l["gate"])
		if g.OldestWait == nil || v > *g.OldestWait {
			g.OldestWait = &v
		}
	})
	each(MetricHold, func(l map[string]string, _ float64, m *dto.Metric) {
		g := gate(l["gate"])
		g.HoldSum += finite(m.GetHistogram().GetSampleSum())
		g.HoldCount += float64(m.GetHistogram().GetSampleCount())
	})
	each(MetricWait, func(l map[string]string, _ float64, m *dto.Metric) {
		g := gate(l["gate"])
		g.WaitSum += finite(m.GetHistogram().GetSampleSum())
		g.WaitCount += float64(m.GetHistogram().GetSampleCount())
	})
	for _, name := range []string{MetricRetryOriginals, MetricRetryAttempts} {
		each(name, func(l map[string]string, v float64, _ *dto.Metric) {
			k := labelKey(l)
			c := rd.Retries[k]
			if name == MetricRetryOriginals {
				c.Originals += v
			} else {
				c.Attempts += v
			}
			rd.Retries[k] = c
		})
	}
	if bad != nil {
		return nil, bad
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

// sampleValue reads a counter, gauge or untyped sample.
func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0
	}
	return v
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
