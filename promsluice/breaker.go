package promsluice

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/internal/metricname"
)

// BreakerMetrics exports circuit breakers, read from Breaker.Stats at
// scrape time. It is a prometheus.Collector. The zero value is not usable;
// call NewBreakerMetrics. Safe for concurrent use.
//
// Metrics (breaker = breaker.Config.Name; state, from, to = closed, open,
// half_open; every state and transition is exported, zero included):
//
//	sluice_breaker_state{breaker,state}             1 for the current state, 0 for the others
//	sluice_breaker_transitions_total{breaker,from,to}
//	sluice_breaker_allowed_total{breaker}           calls let through (probes included)
//	sluice_breaker_rejected_total{breaker}          calls refused (open, or half-open with every probe slot taken)
type BreakerMetrics struct {
	mu       sync.Mutex
	breakers []*breaker.Breaker

	state, transitions, allowed, rejected *prometheus.Desc
}

// NewBreakerMetrics returns an empty BreakerMetrics; Add breakers to it.
func NewBreakerMetrics() *BreakerMetrics {
	return &BreakerMetrics{
		state:       prometheus.NewDesc(metricname.BreakerState, "1 for the breaker's current state, 0 for the others.", []string{"breaker", "state"}, nil),
		transitions: prometheus.NewDesc(metricname.BreakerTransitions, "State changes, by from and to state.", []string{"breaker", "from", "to"}, nil),
		allowed:     prometheus.NewDesc(metricname.BreakerAllowed, "Calls the breaker let through, half-open probes included.", []string{"breaker"}, nil),
		rejected:    prometheus.NewDesc(metricname.BreakerRejected, "Calls the breaker refused.", []string{"breaker"}, nil),
	}
}

// Add exports b. Adding the same breaker twice is a no-op.
func (m *BreakerMetrics) Add(b *breaker.Breaker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.breakers {
		if have == b {
			return
		}
	}
	m.breakers = append(m.breakers, b)
}

// Describe implements prometheus.Collector.
func (m *BreakerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.state
	ch <- m.transitions
	ch <- m.allowed
	ch <- m.rejected
}

// Collect implements prometheus.Collector.
func (m *BreakerMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	breakers := append([]*breaker.Breaker(nil), m.breakers...)
	m.mu.Unlock()
	for _, b := range breakers {
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
