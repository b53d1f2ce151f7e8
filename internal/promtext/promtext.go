// Package promtext reads the Prometheus text exposition format for sluice's
// tools, `sluice load --metrics` and `sluice doctor`, under one rule for
// what a sample may hold, so the two never read the same scrape
// differently.
//
// The text itself is parsed by expfmt (prometheus/common), the reference
// parser; this package picks out the families the caller asks for,
// checks them, and flattens each series to its labels and numbers.
//
// # The rule
//
// Only the families the caller names are checked and returned; every
// other family in the text is ignored, whatever it holds (a NaN gauge of
// some other library never spoils a reading). For a named family:
//
//   - Its TYPE must be the kind the caller expects, or untyped (no TYPE
//     line, or TYPE untyped) for a counter or a gauge: an untyped sample
//     is read as the expected kind. A histogram must be declared one: an
//     untyped sample has no sum and count. Any other type is an error
//     naming the family.
//   - Counters: every value must be finite and 0 or more. Prometheus
//     defines a counter as a count that starts at 0 and only rises; NaN
//     or an infinity cannot be subtracted into an increase, and a JSON
//     report cannot hold one.
//   - Gauges: the same, finite and 0 or more. Prometheus lets a gauge
//     take any value, but every gauge sluice's tools read is a number of
//     slots or callers or an age in seconds: a negative one means the
//     exporter's books are broken, and NaN or an infinity cannot be
//     summed over series. A gauge that may rightly go negative (a pool's
//     queue capacity of -1, unbounded) is simply not one the tools ask
//     for.
//   - Histograms: the sum (of durations), the count and every bucket's
//     count, finite and 0 or more.
//
// One bad sample makes the whole reading an error (a *SampleError): a
// reading is only trusted whole. Counters and gauges differ in what the
// caller does across readings, not here: a counter that went down was
// reset (its process restarted), a gauge is read as it is.
package promtext

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicehq/sluice/internal/metricname"
)

// MaxBytes bounds the text Parse reads: a /metrics page larger than this
// is an error, never read in part.
const MaxBytes = 32 << 20

// ErrSyntax is wrapped by the errors of text that is not the exposition
// format (what expfmt rejects), or is larger than MaxBytes.
var ErrSyntax = errors.New("not Prometheus text exposition")

// SampleError is a named family that breaks the rule: a sample's value or
// the family's declared type.
type SampleError struct {
	// Family is the family's name; Series its labels as the exposition
	// writes them ({gate="db"}), empty for a type error.
	Family, Series string
	// Problem says what is wrong, in words.
	Problem string
}

func (e *SampleError) Error() string { return e.Family + e.Series + ": " + e.Problem }

// Sample is one series of a family.
type Sample struct {
	// Labels are the series' labels by name; never nil.
	Labels map[string]string
	// Value is a counter's or a gauge's value; for a histogram, the sum
	// of its observations.
	Value float64
	// Count is a histogram's number of observations; 0 otherwise.
	Count float64
}

// Families are the samples of each family read, by family name. A family
// the caller asked for that the text lacks, or declares without a sample,
// has no entry.
type Families map[string][]Sample

// Parse reads text exposition from r, at most MaxBytes, and returns the
// samples of the families in want, checked under the package's rule. A
// want of the zero Kind is skipped.
// Errors are ErrSyntax-wrapped or a *SampleError.
func Parse(r io.Reader, want ...metricname.Family) (Families, error) {
	return parse(r, MaxBytes, want)
}

// parse is Parse reading at most limit bytes.
func parse(r io.Reader, limit int64, want []metricname.Family) (Families, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading: %v", ErrSyntax, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrSyntax, limit)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	out := Families{}
	for _, w := range want {
		f := fams[w.Name]
		if f == nil || w.Kind == 0 { // a want of no kind is no family (see metricname.Families)
			continue
		}
		samples, err := read(f, w)
		if err != nil {
			return nil, err
		}
		out[w.Name] = samples
	}
	return out, nil
}

// read checks one family against the rule and flattens its series.
func read(f *dto.MetricFamily, w metricname.Family) ([]Sample, error) {
	typ := f.GetType()
	switch {
	case w.Kind == metricname.Counter && (typ == dto.MetricType_COUNTER || typ == dto.MetricType_UNTYPED),
		w.Kind == metricname.Gauge && (typ == dto.MetricType_GAUGE || typ == dto.MetricType_UNTYPED),
		w.Kind == metricname.Histogram && typ == dto.MetricType_HISTOGRAM:
	default:
		want := w.Kind.String()
		if w.Kind != metricname.Histogram {
			want += " (or untyped)"
		}
		return nil, &SampleError{Family: w.Name, Problem: fmt.Sprintf("TYPE %s, want %s", strings.ToLower(typ.String()), want)}
	}
	out := make([]Sample, 0, len(f.GetMetric()))
	for _, m := range f.GetMetric() {
		s := Sample{Labels: make(map[string]string, len(m.GetLabel()))}
		for _, l := range m.GetLabel() {
			s.Labels[l.GetName()] = l.GetValue()
		}
		check := func(what string, v float64) error {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return &SampleError{Family: w.Name, Series: series(s.Labels),
					Problem: fmt.Sprintf("%s %v: a %s here is a finite number, 0 or more", what, v, w.Kind)}
			}
			return nil
		}
		var err error
		switch w.Kind {
		case metricname.Counter:
			s.Value = m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			err = check("value", s.Value)
		case metricname.Gauge:
			s.Value = m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			err = check("value", s.Value)
		case metricname.Histogram:
			h := m.GetHistogram()
			s.Value, s.Count = h.GetSampleSum(), histCount(h.SampleCountFloat, h.GetSampleCount())
			if err = check("sum", s.Value); err == nil {
				err = check("count", s.Count)
			}
			for _, b := range h.GetBucket() {
				if err == nil {
					err = check(fmt.Sprintf("bucket le=%v count", b.GetUpperBound()), histCount(b.CumulativeCountFloat, b.GetCumulativeCount()))
				}
			}
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// histCount is a histogram count, which expfmt keeps as a float when the
// text's is not a whole number (NaN included).
func histCount(f *float64, n uint64) float64 {
	if f != nil {
		return *f
	}
	return float64(n)
}

// series writes labels as the exposition does: {a="x",b="y"}, sorted.
func series(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", n, labels[n])
	}
	b.WriteByte('}')
	return b.String()
}
