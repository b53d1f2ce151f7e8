package promsluice

import (
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/pool"
)

// DefaultLatencyBuckets are the wait and hold histogram buckets, in
// seconds: 50µs to 10s, roughly doubling, because gated work ranges from a
// fast disk read to a slow upstream call.
var DefaultLatencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// Metrics exports everything a service builds with sluice: gates,
// adaptive limits, quotas, breakers, retry policies and pools (see Add).
// It is one prometheus.Collector (counters and gauges read from each
// part's Stats at scrape time), an admit.Observer (the gates' wait and
// hold histograms) and a pool.Observer (the pools' queue-wait and
// run-time histograms). The zero value is not usable; call NewMetrics.
// Safe for concurrent use.
type Metrics struct {
	wait *prometheus.HistogramVec
	hold *prometheus.HistogramVec

	mu       sync.Mutex
	gates    []*admit.Gate
	refusals []func() []Refusal // AddRefusals, and the quotas' and breakers' own
	added    map[any]bool       // parts Add has seen (pointers only)

	limits   *limitMetrics
	quotas   *quotaMetrics
	breakers *breakerMetrics
	retries  *retryMetrics
	pools    *poolMetrics

	offered, admitted, rejected, completed    *prometheus.Desc
	inflight, waiting, capacity, peak, misuse *prometheus.Desc
	oldestWait                                *prometheus.Desc
	classAdmitted, classRejected              *prometheus.Desc
	classInUse, classWaiting                  *prometheus.Desc
}

// NewMetrics returns an empty Metrics. Build gates with its NewGate
// method (observed and exported in one step), and Add everything else.
func NewMetrics() *Metrics {
	return &Metrics{
		added:    map[any]bool{},
		limits:   newLimitMetrics(),
		quotas:   newQuotaMetrics(),
		breakers: newBreakerMetrics(),
		retries:  newRetryMetrics(),
		pools:    newPoolMetrics(),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricname.AdmissionWait,
			Help:    "Time callers spent queued for a slot, admitted or not.",
			Buckets: DefaultLatencyBuckets,
		}, []string{"gate", "kind"}),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricname.AdmissionHold,
			Help:    "Time admitted work held its slot (dropped work is not sampled).",
			Buckets: DefaultLatencyBuckets,
		}, []string{"gate", "kind"}),
		offered:   prometheus.NewDesc(metricname.AdmissionOffered, "Attempts that reached the gate.", []string{"gate", "kind"}, nil),
		admitted:  prometheus.NewDesc(metricname.AdmissionAdmitted, "Attempts that got a slot.", []string{"gate", "kind"}, nil),
		rejected:  prometheus.NewDesc(metricname.AdmissionRejected, "Attempts rejected, by reason.", []string{"gate", "kind", "reason"}, nil),
		completed: prometheus.NewDesc(metricname.AdmissionCompleted, "Admitted work that ended, by outcome.", []string{"gate", "kind", "outcome"}, nil),
		inflight:  prometheus.NewDesc(metricname.AdmissionInflight, "Admitted work not yet completed.", []string{"gate"}, nil),
		waiting:   prometheus.NewDesc(metricname.AdmissionWaiting, "Attempts queued and not yet decided.", []string{"gate"}, nil),
		capacity:  prometheus.NewDesc(metricname.AdmissionCapacity, "Slots the gate has.", []string{"gate"}, nil),
		peak:      prometheus.NewDesc(metricname.AdmissionPeakInUse, "Most slots ever held at once.", []string{"gate"}, nil),
		misuse:    prometheus.NewDesc(metricname.AdmissionMisuse, "Permits ended more than once (the extra ends freed nothing).", []string{"gate"}, nil),
		oldestWait: prometheus.NewDesc(metricname.AdmissionOldestWait,
			"How long the oldest caller still queued has waited (0: nobody queued). A value that keeps growing means the queue is not moving.", []string{"gate"}, nil),
		classAdmitted: prometheus.NewDesc(metricname.AdmissionClassAdmitted, "Attempts that got a slot, by priority class (exported once a gate sees a class other than the default).", []string{"gate", "class"}, nil),
		classRejected: prometheus.NewDesc(metricname.AdmissionClassRejected, "Attempts rejected, by priority class and reason.", []string{"gate", "class", "reason"}, nil),
		classInUse:    prometheus.NewDesc(metricname.AdmissionClassInUse, "Slots held, by priority class.", []string{"gate", "class"}, nil),
		classWaiting:  prometheus.NewDesc(metricname.AdmissionClassWaiting, "Attempts queued, by priority class.", []string{"gate", "class"}, nil),
	}
}

// NewGate builds a gate from cfg with m as its Observer (besides
// cfg.Observer, if any) and adds it to m: its counters, gauges and both
// histograms are exported from then on. It returns admit.New's error, or
// an error if m already exports a gate of the same name.
func (m *Metrics) NewGate(cfg admit.Config) (*admit.Gate, error) {
	if cfg.Observer != admit.Observer(m) {
		cfg.Observer = admit.Observers(cfg.Observer, m)
	}
	g, err := admit.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := m.addGate(g); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// Gates returns the gates m exports, in the order they were added: what
// server.Config.Gates wants.
func (m *Metrics) Gates() []*admit.Gate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*admit.Gate(nil), m.gates...)
}

// addGate exports g's counters and gauges. Its wait and hold histograms
// are exported only if g was built with m as its Observer (NewGate does
// both). Adding the same gate twice is a no-op; another gate of the same
// name is an error, as their series would clash.
func (m *Metrics) addGate(g *admit.Gate) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.gates {
		if have == g {
			return nil
		}
		if have.Name() == g.Name() {
			return fmt.Errorf("promsluice: a gate named %q is already exported here; its series would clash", g.Name())
		}
	}
	m.gates = append(m.gates, g)
	return nil
}

// removeGate stops exporting g: its counters, gauges and histograms.
// Removing a gate m does not export is a no-op.
func (m *Metrics) removeGate(g *admit.Gate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.Index(m.gates, g)
	if i < 0 {
		return
	}
	m.gates = slices.Delete(m.gates, i, i+1)
	// Names are unique among the exported gates (addGate), so the
	// histograms of g's name are g's alone.
	m.wait.DeletePartialMatch(prometheus.Labels{"gate": g.Name()})
	m.hold.DeletePartialMatch(prometheus.Labels{"gate": g.Name()})
}

// ObserveAdmission records the wait of callers that were queued. A nil
// *Metrics observes nothing (admit.New also treats one as no observer).
func (m *Metrics) ObserveAdmission(e admit.AdmissionEvent) {
	if m != nil && e.Wait > 0 {
		m.wait.WithLabelValues(e.Gate, e.Kind).Observe(e.Wait.Seconds())
	}
}

// ObserveCompletion records the hold time of work that produced a sample.
func (m *Metrics) ObserveCompletion(e admit.CompletionEvent) {
	if m != nil && e.Sample() {
		m.hold.WithLabelValues(e.Gate, e.Kind).Observe(e.Hold.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.offered, m.admitted, m.rejected, m.completed, m.inflight, m.waiting, m.capacity, m.peak, m.misuse,
		m.oldestWait, m.classAdmitted, m.classRejected, m.classInUse, m.classWaiting} {
		ch <- d
	}
	m.wait.Describe(ch)
	m.hold.Describe(ch)
	m.limits.Describe(ch)
	m.quotas.Describe(ch)
	m.breakers.Describe(ch)
	m.retries.Describe(ch)
	m.pools.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	gates := append([]*admit.Gate(nil), m.gates...)
	m.mu.Unlock()
	outside := m.readRefusals() // refusals made outside gates, merged into the same family
	for _, g := range gates {
		s := g.Stats()
		for _, k := range s.Kinds {
			ch <- prometheus.MustNewConstMetric(m.offered, prometheus.CounterValue, float64(k.Offered), s.Gate, k.Kind)
			ch <- prometheus.MustNewConstMetric(m.admitted, prometheus.CounterValue, float64(k.Admitted), s.Gate, k.Kind)
			for r := admit.ReasonNone + 1; int(r) < admit.NumReasons; r++ {
				n := k.Rejected[r]
				if key := (refusalKey{s.Gate, k.Kind, r.String()}); outside != nil {
					n += outside[key]
					delete(outside, key)
				}
				ch <- prometheus.MustNewConstMetric(m.rejected, prometheus.CounterValue, float64(n), s.Gate, k.Kind, r.String())
			}
			for o := admit.OutcomeOK; int(o) < admit.NumOutcomes; o++ {
				ch <- prometheus.MustNewConstMetric(m.completed, prometheus.CounterValue, float64(k.Completed[o]), s.Gate, k.Kind, o.String())
			}
		}
		ch <- prometheus.MustNewConstMetric(m.inflight, prometheus.GaugeValue, float64(s.Inflight), s.Gate)
		ch <- prometheus.MustNewConstMetric(m.waiting, prometheus.GaugeValue, float64(s.Waiting), s.Gate)
		ch <- prometheus.MustNewConstMetric(m.capacity, prometheus.GaugeValue, float64(s.Capacity), s.Gate)
		ch <- prometheus.MustNewConstMetric(m.peak, prometheus.GaugeValue, float64(s.PeakInUse), s.Gate)
		ch <- prometheus.MustNewConstMetric(m.misuse, prometheus.CounterValue, float64(s.Misuse), s.Gate)
		ch <- prometheus.MustNewConstMetric(m.oldestWait, prometheus.GaugeValue, s.OldestWait.Seconds(), s.Gate)
		if classesUsed(&s) {
			for _, cs := range s.Classes {
				c := cs.Class.String()
				ch <- prometheus.MustNewConstMetric(m.classAdmitted, prometheus.CounterValue, float64(cs.Admitted), s.Gate, c)
				for r := admit.ReasonNone + 1; int(r) < admit.NumReasons; r++ {
					ch <- prometheus.MustNewConstMetric(m.classRejected, prometheus.CounterValue, float64(cs.Rejected[r]), s.Gate, c, r.String())
				}
				ch <- prometheus.MustNewConstMetric(m.classInUse, prometheus.GaugeValue, float64(cs.InUse), s.Gate, c)
				ch <- prometheus.MustNewConstMetric(m.classWaiting, prometheus.GaugeValue, float64(cs.Waiting), s.Gate, c)
			}
		}
	}
	for k, n := range outside {
		ch <- prometheus.MustNewConstMetric(m.rejected, prometheus.CounterValue, float64(n), k.gate, k.kind, k.reason)
	}
	m.wait.Collect(ch)
	m.hold.Collect(ch)
	m.limits.Collect(ch)
	m.quotas.Collect(ch)
	m.breakers.Collect(ch)
	m.retries.Collect(ch)
	m.pools.Collect(ch)
}

// classesUsed reports whether the gate has seen a class other than the
// default: gates that never do export no per-class series.
func classesUsed(s *admit.Stats) bool {
	for c := 1; c < admit.NumClasses; c++ {
		cs := &s.Classes[c]
		if cs.Admitted != 0 || cs.Rejected.Total() != 0 || cs.Waiting != 0 {
			return true
		}
	}
	return false
}

var (
	_ prometheus.Collector = (*Metrics)(nil)
	_ admit.Observer       = (*Metrics)(nil)
	_ pool.Observer        = (*Metrics)(nil)
)
