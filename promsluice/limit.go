package promsluice

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/limit"
)

// limitMetrics exports adaptive limits (package limit): the current limit,
// the law's inputs, decisions by kind, and the recovery ramp. Everything is
// read from Adaptive.State at scrape time, so it never drifts from /state.
// It is the part of Metrics that Metrics.Add of an Adaptive feeds. Safe
// for concurrent use.
//
// Labels: gate (the attached gate's name), law (aimd, vegas, gradient2)
// and decision (limit.Decision's bounded names).
type limitMetrics struct {
	mu    sync.Mutex
	limit []*limit.Adaptive

	capacity, latency, baseline, ceiling, overload, episode *prometheus.Desc
	tail, wait, budget                                      *prometheus.Desc
	decisions, windows                                      *prometheus.Desc
	rampActive, rampLevel, rampSteps, rampTarget            *prometheus.Desc
}

// newLimitMetrics returns an empty limitMetrics.
func newLimitMetrics() *limitMetrics {
	gl := []string{"gate", "law"}
	g := []string{"gate"}
	return &limitMetrics{
		capacity:   prometheus.NewDesc(metricname.LimitCapacity, "Capacity the adaptive limit last set on the gate, in slots.", gl, nil),
		latency:    prometheus.NewDesc(metricname.LimitLatency, "The last window's latency measure (a quantile of hold times, or the signal).", gl, nil),
		baseline:   prometheus.NewDesc(metricname.LimitBaseline, "The law's learned unloaded latency.", gl, nil),
		ceiling:    prometheus.NewDesc(metricname.LimitCeiling, "The SLO ceiling the limit is anchored to (0: none).", g, nil),
		tail:       prometheus.NewDesc(metricname.LimitTail, "The last window's 99th percentile hold time (or the signal's measure).", g, nil),
		wait:       prometheus.NewDesc(metricname.LimitQueueWait, "The queue's wait counted against the SLO: the oldest waiter's age as the window closed, if it was as old a window before.", g, nil),
		budget:     prometheus.NewDesc(metricname.LimitBudget, "What the SLO leaves the hold: the SLO less the queue's wait, at least half of it (0: no SLO).", g, nil),
		overload:   prometheus.NewDesc(metricname.LimitOverload, "1 if the last window was above the SLO ceiling.", g, nil),
		episode:    prometheus.NewDesc(metricname.LimitEpisode, "1 while an overload episode is under way.", g, nil),
		decisions:  prometheus.NewDesc(metricname.LimitDecisions, "Windows judged, by decision.", []string{"gate", "decision"}, nil),
		windows:    prometheus.NewDesc(metricname.LimitWindows, "Windows judged.", g, nil),
		rampActive: prometheus.NewDesc(metricname.LimitRampActive, "1 while capacity is recovering in steps after an episode.", g, nil),
		rampLevel:  prometheus.NewDesc(metricname.LimitRampLevel, "The recovery ramp's current step (0 is the episode's floor).", g, nil),
		rampSteps:  prometheus.NewDesc(metricname.LimitRampSteps, "Steps from the floor to the pre-episode capacity.", g, nil),
		rampTarget: prometheus.NewDesc(metricname.LimitRampTarget, "The capacity the ramp climbs to, in slots.", g, nil),
	}
}

// add exports a's state. Adding the same Adaptive twice is a no-op.
func (m *limitMetrics) add(a *limit.Adaptive) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.limit {
		if have == a {
			return
		}
	}
	m.limit = append(m.limit, a)
}

// remove stops exporting a. Removing one m does not export is a no-op.
func (m *limitMetrics) remove(a *limit.Adaptive) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := slices.Index(m.limit, a); i >= 0 {
		m.limit = slices.Delete(m.limit, i, i+1)
	}
}

// Describe implements prometheus.Collector.
func (m *limitMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.capacity, m.latency, m.baseline, m.ceiling, m.overload, m.episode,
		m.tail, m.wait, m.budget, m.decisions, m.windows, m.rampActive, m.rampLevel, m.rampSteps, m.rampTarget} {
		ch <- d
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect implements prometheus.Collector.
func (m *limitMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	all := append([]*limit.Adaptive(nil), m.limit...)
	m.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, a := range all {
		s := a.State()
		gauge(m.capacity, float64(s.Limit), s.Gate, s.Law)
		gauge(m.latency, s.Latency.Seconds(), s.Gate, s.Law)
		gauge(m.baseline, s.Baseline.Seconds(), s.Gate, s.Law)
		gauge(m.ceiling, s.Ceiling.Seconds(), s.Gate)
		gauge(m.tail, s.Tail.Seconds(), s.Gate)
		gauge(m.wait, s.Wait.Seconds(), s.Gate)
		gauge(m.budget, s.Budget.Seconds(), s.Gate)
		gauge(m.overload, boolValue(s.Overload), s.Gate)
		gauge(m.episode, boolValue(s.Episode), s.Gate)
		for d := limit.DecisionHold; d < limit.NumDecisions; d++ {
			ch <- prometheus.MustNewConstMetric(m.decisions, prometheus.CounterValue, float64(s.Decisions[d]), s.Gate, d.String())
		}
		ch <- prometheus.MustNewConstMetric(m.windows, prometheus.CounterValue, float64(s.Windows), s.Gate)
		gauge(m.rampActive, boolValue(s.Ramp.Active), s.Gate)
		gauge(m.rampLevel, float64(s.Ramp.Level), s.Gate)
		gauge(m.rampSteps, float64(s.Ramp.Steps), s.Gate)
		gauge(m.rampTarget, float64(s.Ramp.Target), s.Gate)
	}
}

var _ prometheus.Collector = (*limitMetrics)(nil)
