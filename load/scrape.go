package load

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names the scraper reads.
const (
	metricRejected = "sluice_admission_rejected_total"
	metricCPU      = "process_cpu_seconds_total"
)

type rejKey struct{ gate, kind, reason string }

// scrape is one reading of a Prometheus text endpoint.
type scrape struct {
	err      error
	rejected map[rejKey]float64
	cpu      *float64
}

type scraper struct {
	url    string
	client *http.Client
}

func newScraper(url string, timeout time.Duration) *scraper {
	return &scraper{url: url, client: &http.Client{Timeout: timeout}}
}

func (s *scraper) scrape(ctx context.Context) *scrape {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return &scrape{err: err}
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return &scrape{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return &scrape{err: fmt.Errorf("metrics: HTTP %d", resp.StatusCode)}
	}
	return ParseMetrics(io.LimitReader(resp.Body, 32<<20))
}

// ParseMetrics reads Prometheus text exposition and keeps the sluice
// admission rejections and the process CPU counter. A parse error is kept in
// the result, not returned, so a bad scrape marks the window's metrics
// without failing the run.
func ParseMetrics(r io.Reader) *scrape {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return &scrape{err: fmt.Errorf("metrics: %v", err)}
	}
	s := &scrape{rejected: map[rejKey]float64{}}
	if f := fams[metricRejected]; f != nil {
		for _, m := range f.GetMetric() {
			var k rejKey
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "gate":
					k.gate = l.GetValue()
				case "kind":
					k.kind = l.GetValue()
				case "reason":
					k.reason = l.GetValue()
				}
			}
			s.rejected[k] += value(m.GetCounter().GetValue(), m.GetUntyped().GetValue())
		}
	}
	if f := fams[metricCPU]; f != nil && len(f.GetMetric()) > 0 {
		m := f.GetMetric()[0]
		v := value(m.GetCounter().GetValue(), m.GetUntyped().GetValue())
		s.cpu = &v
	}
	return s
}

func value(counter, untyped float64) float64 {
	if counter != 0 {
		return counter
	}
	return untyped
}

// attribute turns two scrapes into the window's Metrics: the rejections the
// server counted, and how many HTTP refusals they account for.
func attribute(url string, before, after *scrape, c Counts) *Metrics {
	m := &Metrics{URL: url, Rejections: []Rejection{}}
	switch {
	case before == nil || after == nil:
		m.Error = "metrics not scraped"
	case before.err != nil:
		m.Error = "before window: " + before.err.Error()
	case after.err != nil:
		m.Error = "after window: " + after.err.Error()
	}
	if m.Error != "" {
		m.Unattributed = c.Refused
		return m
	}
	for k, v := range after.rejected {
		d := v - before.rejected[k]
		if d < 0 { // counter reset: the server restarted
			d = v
		}
		if d == 0 {
			continue
		}
		m.Rejections = append(m.Rejections, Rejection{Gate: k.gate, Kind: k.kind, Reason: k.reason, Delta: d})
	}
	sort.Slice(m.Rejections, func(i, j int) bool {
		a, b := m.Rejections[i], m.Rejections[j]
		if a.Gate != b.Gate {
			return a.Gate < b.Gate
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		return a.Kind < b.Kind
	})
	if after.cpu != nil && before.cpu != nil {
		d := *after.cpu - *before.cpu
		m.ServerCPUSeconds = &d
		if c.OK > 0 {
			per := d / float64(c.OK) * 1000
			m.ServerCPUPerOKMillis = &per
		}
	}
	Attribute(m, c)
	return m
}

// Attribute fills m.RejectedTotal, m.Attributed and m.Unattributed from
// m.Rejections and the HTTP refusals in c. A refusal whose envelope names a
// gate and reason matches a rejection of that gate and reason; a refusal
// without an envelope matches any rejection left over. Each rejection
// matches at most one refusal.
func Attribute(m *Metrics, c Counts) {
	type gr struct{ gate, reason string }
	avail := map[gr]int64{}
	m.RejectedTotal = 0
	for _, r := range m.Rejections {
		m.RejectedTotal += r.Delta
		avail[gr{r.Gate, r.Reason}] += int64(math.Round(r.Delta))
	}
	var attributed, anon int64
	for _, r := range c.Refusals {
		if r.Gate == "" && r.Reason == "" {
			anon += r.Count
			continue
		}
		k := gr{r.Gate, r.Reason}
		a := min(r.Count, avail[k])
		avail[k] -= a
		attributed += a
	}
	var left int64
	for _, v := range avail {
		left += v
	}
	attributed += min(anon, left)
	m.Attributed = attributed
	m.Unattributed = c.Refused - attributed
}
