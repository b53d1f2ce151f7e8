package promsluice

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/retry"
)

// retryMetrics exports retry policies' event counters, read from
// Policy.Stats at scrape time, so exporting costs nothing on the request
// path: the part of Metrics that Metrics.Add of a retry.Policy feeds.
// Safe for concurrent use.
//
// Metrics (label policy = retry.Config.Name, a bounded set; decision is
// honored or refused, a wait hint declined because the deadline was
// nearer):
//
//	sluice_retry_attempts_total{policy}             attempts sent, first ones included
//	sluice_retry_retries_total{policy}              retries decided
//	sluice_retry_budget_exhausted_total{policy}     retries rejected by the budget
//	sluice_retry_throttled_total{policy}            attempts rejected locally by adaptive throttling
//	sluice_retry_retry_after_total{policy,decision} Retry-After (or gRPC pushback) honored or refused
//	sluice_retry_deadline_expired_total{policy}     attempts not started for lack of time
//	sluice_retry_breaker_open_total{policy}         attempts rejected by the breaker
//	sluice_retry_no_retry_signal_total{policy}      refusals that said "do not retry"
type retryMetrics struct {
	mu       sync.Mutex
	policies []*retry.Policy

	attempts, retries, budget, throttled, retryAfter, deadline, breakerOpen, noRetry *prometheus.Desc
}

// newRetryMetrics returns an empty retryMetrics.
func newRetryMetrics() *retryMetrics {
	l := []string{"policy"}
	return &retryMetrics{
		attempts:    prometheus.NewDesc(metricname.RetryAttempts, "Attempts sent to the upstream, first attempts included.", l, nil),
		retries:     prometheus.NewDesc(metricname.RetryRetries, "Retries decided (each followed by a wait and an attempt unless the caller left).", l, nil),
		budget:      prometheus.NewDesc(metricname.RetryBudgetExhausted, "Retries wanted but rejected because the retry budget was spent.", l, nil),
		throttled:   prometheus.NewDesc(metricname.RetryThrottled, "Attempts rejected locally by adaptive client throttling.", l, nil),
		retryAfter:  prometheus.NewDesc(metricname.RetryRetryAfter, "Server wait hints (Retry-After, gRPC pushback) honored, or refused (declined) because the deadline was nearer.", []string{"policy", "decision"}, nil),
		deadline:    prometheus.NewDesc(metricname.RetryDeadlineExpired, "Attempts not started because the caller's deadline left no time.", l, nil),
		breakerOpen: prometheus.NewDesc(metricname.RetryBreakerOpen, "Attempts rejected by the policy's circuit breaker.", l, nil),
		noRetry:     prometheus.NewDesc(metricname.RetryNoRetrySignal, "Refusals that carried the do-not-retry signal.", l, nil),
	}
}

// add exports p's counters. Adding the same policy twice is a no-op.
func (m *retryMetrics) add(p *retry.Policy) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.policies {
		if have == p {
			return
		}
	}
	m.policies = append(m.policies, p)
}

// Describe implements prometheus.Collector.
func (m *retryMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.attempts, m.retries, m.budget, m.throttled, m.retryAfter, m.deadline, m.breakerOpen, m.noRetry} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *retryMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	policies := append([]*retry.Policy(nil), m.policies...)
	m.mu.Unlock()
	for _, p := range policies {
		s, n := p.Stats(), p.Name()
		c := func(d *prometheus.Desc, e retry.Event, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(s[e]), append([]string{n}, extra...)...)
		}
		c(m.attempts, retry.EventAttempt)
		c(m.retries, retry.EventRetry)
		c(m.budget, retry.EventBudgetExhausted)
		c(m.throttled, retry.EventThrottled)
		c(m.retryAfter, retry.EventRetryAfterHonored, "honored")
		c(m.retryAfter, retry.EventRetryAfterRefused, "refused")
		c(m.deadline, retry.EventDeadlineExpired)
		c(m.breakerOpen, retry.EventBreakerOpen)
		c(m.noRetry, retry.EventNoRetrySignal)
	}
}
