package load

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/internal/promtext"
)

// families are what the scraper reads: the names promsluice exports,
// spelled once in internal/metricname, with the kinds listed there.
var families = metricname.Families(
	metricname.AdmissionRejected, metricname.ConnectionsRejected, metricname.AdmissionAdmitted,
	metricname.AdmissionCompleted, metricname.AdmissionInflight, metricname.AdmissionWaiting,
	metricname.AdmissionCapacity, metricname.AdmissionHold, metricname.ProcessCPUSeconds,
)

// connectionsGate is the gate name connection-level refusals are booked
// under: connlimit's busy reply names it in its envelope too.
const connectionsGate = "connections"

type rejKey struct{ gate, kind, reason string }

// gateReading is one gate's books in one scrape.
type gateReading struct {
	admitted, completed, holdSum float64
	inflight, waiting, capacity  *float64
}

// scrape is one reading of a Prometheus text endpoint.
type scrape struct {
	err      error
	rejected map[rejKey]float64
	gates    map[string]*gateReading
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
	return parseMetrics(resp.Body) // promtext.Parse bounds what it reads
}

// parseMetrics reads Prometheus text exposition and keeps the sluice
// admission rejections, the gates' books and the process CPU counter,
// under internal/promtext's rule (a NaN, infinite or negative sample in a
// family read is an error). A parse error is kept in the result, not
// returned, so a bad scrape marks the window's metrics without failing
// the run.
func parseMetrics(r io.Reader) *scrape {
	fams, err := promtext.Parse(r, families...)
	if err != nil {
		return &scrape{err: fmt.Errorf("metrics: %v", err)}
	}
	s := &scrape{rejected: map[rejKey]float64{}, gates: map[string]*gateReading{}}
	gate := func(m promtext.Sample) *gateReading {
		name := m.Labels["gate"]
		g := s.gates[name]
		if g == nil {
			g = &gateReading{}
			s.gates[name] = g
		}
		return g
	}
	for _, m := range fams[metricname.ConnectionsRejected] {
		s.rejected[rejKey{gate: connectionsGate, reason: m.Labels["reason"]}] += m.Value
	}
	for _, m := range fams[metricname.AdmissionAdmitted] {
		gate(m).admitted += m.Value
	}
	for _, m := range fams[metricname.AdmissionCompleted] {
		gate(m).completed += m.Value
	}
	for _, m := range fams[metricname.AdmissionHold] {
		gate(m).holdSum += m.Value
	}
	for name, dst := range map[string]func(*gateReading) **float64{
		metricname.AdmissionInflight: func(g *gateReading) **float64 { return &g.inflight },
		metricname.AdmissionWaiting:  func(g *gateReading) **float64 { return &g.waiting },
		metricname.AdmissionCapacity: func(g *gateReading) **float64 { return &g.capacity },
	} {
		for _, m := range fams[name] {
			v := m.Value
			p := dst(gate(m))
			if *p != nil {
				v += **p
			}
			*p = &v
		}
	}
	for _, m := range fams[metricname.AdmissionRejected] {
		s.rejected[rejKey{gate: m.Labels["gate"], kind: m.Labels["kind"], reason: m.Labels["reason"]}] += m.Value
	}
	if cpu := fams[metricname.ProcessCPUSeconds]; len(cpu) > 0 {
		v := cpu[0].Value
		s.cpu = &v
	}
	return s
}

// attribute turns two scrapes into the window's Metrics: the rejections the
// server counted, how many HTTP refusals they account for, and each gate's
// books over the window (elapsedS long).
func attribute(url string, before, after *scrape, c Counts, elapsedS float64) *Metrics {
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
	m.Gates = balances(before, after, elapsedS)
	m.BooksClosed = true
	for _, g := range m.Gates {
		m.BooksClosed = m.BooksClosed && g.Closed
	}
	if after.cpu != nil && before.cpu != nil {
		d := *after.cpu - *before.cpu
		m.ServerCPUSeconds = &d
		if c.OK > 0 {
			per := d / float64(c.OK) * 1000
			m.ServerCPUPerOKMillis = &per
		}
	}
	attributeRefusals(m, c)
	return m
}

// attributeRefusals fills m.RejectedTotal, m.Attributed and m.Unattributed from
// m.Rejections and the HTTP refusals in c. A refusal whose envelope names a
// gate and reason matches a rejection of that gate and reason; a refusal
// without an envelope matches any rejection left over. Each rejection
// matches at most one refusal.
func attributeRefusals(m *Metrics, c Counts) {
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

// balances compares each gate's books before and after a drained window:
// every slot taken in it was given back (inflight and waiting back to 0)
// and admitted = completed over the window. Occupancy is the summed hold
// time over the window: the mean number of slots in use.
func balances(before, after *scrape, elapsedS float64) []GateBalance {
	out := []GateBalance{}
	for name, a := range after.gates {
		b := before.gates[name]
		if b == nil {
			b = &gateReading{}
		}
		g := GateBalance{Gate: name, Admitted: delta(a.admitted, b.admitted), Completed: delta(a.completed, b.completed),
			HoldSeconds: delta(a.holdSum, b.holdSum), Inflight: a.inflight, Waiting: a.waiting, Capacity: a.capacity, Problems: []string{}}
		if elapsedS > 0 {
			g.Occupancy = g.HoldSeconds / elapsedS
		}
		if g.Inflight != nil && *g.Inflight != 0 {
			g.Problems = append(g.Problems, fmt.Sprintf("inflight %g after the drain, want 0", *g.Inflight))
		}
		if g.Waiting != nil && *g.Waiting != 0 {
			g.Problems = append(g.Problems, fmt.Sprintf("waiting %g after the drain, want 0", *g.Waiting))
		}
		if g.Admitted != g.Completed {
			g.Problems = append(g.Problems, fmt.Sprintf("admitted %g but completed %g in the window", g.Admitted, g.Completed))
		}
		g.Closed = len(g.Problems) == 0
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Gate < out[j].Gate })
	return out
}

// delta is a counter's increase, reading a decrease as a restart.
func delta(after, before float64) float64 {
	if after < before {
		return after
	}
	return after - before
}
