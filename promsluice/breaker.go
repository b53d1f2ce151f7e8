package promsluice

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/internal/metricname"
)

// breakerMetrics is the part of Metrics that exports circuit breakers
// (Metrics.Add of a breaker or a breaker.Group), read from Breaker.Stats
// at scrape time. Safe for concurrent use.
//
// Metrics (breaker = breaker.Config.Name; state, from, to = closed, open,
// half_open; every state and transition is exported, zero included):
//
//	sluice_breaker_state{breaker,state}             1 for the current state, 0 for the others
//	sluice_breaker_transitions_total{breaker,from,to}
//	sluice_breaker_allowed_total{breaker}           calls let through (probes included)
//	sluice_breaker_rejected_total{breaker}          calls rejected (open, or half-open with every probe slot taken)
type breakerMetrics struct {
	mu       sync.Mutex
	breakers []*breaker.Breaker
	groups   []*breaker.Group // every breaker in them, as of each scrape

	state, transitions, allowed, rejected *prometheus.Desc
}

// newBreakerMetrics returns an empty breakerMetrics.
func newBreakerMetrics() *breakerMetrics {
	return &breakerMetrics{
		state:       prometheus.NewDesc(metricname.BreakerState, "1 for the breaker's current state, 0 for the others.", []string{"breaker", "state"}, nil),
		transitions: prometheus.NewDesc(metricname.BreakerTransitions, "State changes, by from and to state.", []string{"breaker", "from", "to"}, nil),
		allowed:     prometheus.NewDesc(metricname.BreakerAllowed, "Calls the breaker let through, half-open probes included.", []string{"breaker"}, nil),
		rejected:    prometheus.NewDesc(metricname.BreakerRejected, "Calls the breaker rejected.", []string{"breaker"}, nil),
	}
}

// add exports b. Adding the same breaker twice is a no-op.
func (m *breakerMetrics) add(b *breaker.Breaker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.breakers {
		if have == b {
			return
		}
	}
	m.breakers = append(m.breakers, b)
}

// addGroup exports every breaker g has at each scrape (its overflow
// breaker included, once it exists). Adding the same group twice is a
// no-op.
func (m *breakerMetrics) addGroup(g *breaker.Group) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.groups {
		if have == g {
			return
		}
	}
	m.groups = append(m.groups, g)
}

// all returns the breakers to export now: those added, then the groups'.
func (m *breakerMetrics) all() []*breaker.Breaker {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := append([]*breaker.Breaker(nil), m.breakers...)
	for _, g := range m.groups {
		out = append(out, groupBreakers(g)...)
	}
	return out
}

// groupBreakers returns g's breakers: one per key, and the overflow one.
func groupBreakers(g *breaker.Group) []*breaker.Breaker {
	var out []*breaker.Breaker
	for _, b := range g.All() {
		out = append(out, b)
	}
	if o := g.Overflow(); o != nil {
		out = append(out, o)
	}
	return out
}

// Describe implements prometheus.Collector.
func (m *breakerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.state
	ch <- m.transitions
	ch <- m.allowed
	ch <- m.rejected
}

// Collect implements prometheus.Collector.
func (m *breakerMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, b := range m.all() {
		s, n := b.Stats(), b.Name()
		for st := range breaker.State(breaker.NumStates) {
			v := 0.0
			if st == s.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(m.state, prometheus.GaugeValue, v, n, st.String())
			for to := range breaker.State(breaker.NumStates) {
				if to != st {
					ch <- prometheus.MustNewConstMetric(m.transitions, prometheus.CounterValue, float64(s.Transitions[st][to]), n, st.String(), to.String())
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(m.allowed, prometheus.CounterValue, float64(s.Allowed), n)
		ch <- prometheus.MustNewConstMetric(m.rejected, prometheus.CounterValue, float64(s.Rejected), n)
	}
}
