package promsluice

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/quota"
)

// quotaMetrics is the part of Metrics that exports rate quotas' counters
// (Metrics.Add of a quota) as sluice_quota_*, labelled by the quota's name
// only (never a key: keys are unbounded). It reads each quota's Stats at
// scrape time, so deciding costs nothing extra.
//
//	sluice_quota_allowed_total{quota}           decisions admitted
//	sluice_quota_limited_total{quota}           decisions rejected with reason rate (429)
//	sluice_quota_rejected_total{quota,reason}   rejected for another reason: full (key table full,
//	                                            RefuseNew) or breaker_open (fleet store down, fail closed)
//	sluice_quota_keys{quota}                    keys in the table now
//	sluice_quota_max_keys{quota}                the table's bound
//	sluice_quota_evictions_total{quota,cause}   keys dropped: idle or lru
//	sluice_quota_mode{quota,mode}               1 for the mode deciding now: local, fleet or fallback
//	sluice_quota_fallback_decisions_total{quota} fleet quotas: decisions made without the store
//	sluice_quota_store_errors_total{quota}      fleet quotas: store calls that failed or timed out
//
// Safe for concurrent use.
type quotaMetrics struct {
	mu      sync.Mutex
	sources []func() []quota.Stats

	allowed, limited, rejected, keys, maxKeys, evictions, mode, fallbacks, storeErrors *prometheus.Desc
}

// newQuotaMetrics returns an empty quotaMetrics.
func newQuotaMetrics() *quotaMetrics {
	q := []string{"quota"}
	return &quotaMetrics{
		allowed:     prometheus.NewDesc(metricname.QuotaAllowed, "Quota decisions that admitted the request.", q, nil),
		limited:     prometheus.NewDesc(metricname.QuotaLimited, "Quota decisions rejected with reason rate (HTTP 429).", q, nil),
		rejected:    prometheus.NewDesc(metricname.QuotaRejected, "Quota decisions rejected for a reason other than rate.", []string{"quota", "reason"}, nil),
		keys:        prometheus.NewDesc(metricname.QuotaKeys, "Keys in the quota's table.", q, nil),
		maxKeys:     prometheus.NewDesc(metricname.QuotaMaxKeys, "Bound of the quota's key table.", q, nil),
		evictions:   prometheus.NewDesc(metricname.QuotaEvictions, "Keys dropped from the quota's table.", []string{"quota", "cause"}, nil),
		mode:        prometheus.NewDesc(metricname.QuotaMode, "1 for the mode the quota decides in now.", []string{"quota", "mode"}, nil),
		fallbacks:   prometheus.NewDesc(metricname.QuotaFallbackDecisions, "Fleet quota decisions made by the fallback.", q, nil),
		storeErrors: prometheus.NewDesc(metricname.QuotaStoreErrors, "Fleet quota store calls that failed or timed out.", q, nil),
	}
}

// add exports the quota whose Stats read returns (a *quota.Quota's or a
// fleet quota's Stats method).
func (m *quotaMetrics) add(read func() []quota.Stats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sources = append(m.sources, read)
}

// Describe implements prometheus.Collector.
func (m *quotaMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.allowed, m.limited, m.rejected, m.keys, m.maxKeys, m.evictions, m.mode, m.fallbacks, m.storeErrors} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *quotaMetrics) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	m.mu.Lock()
	sources := append([]func() []quota.Stats(nil), m.sources...)
	m.mu.Unlock()
	for _, read := range sources {
		for _, s := range read() {
			counter(m.allowed, s.Allowed, s.Quota)
			counter(m.limited, s.Limited, s.Quota)
			counter(m.rejected, s.RejectedFull, s.Quota, "full")
			counter(m.rejected, s.RejectedStore, s.Quota, "breaker_open")
			gauge(m.keys, float64(s.Keys), s.Quota)
			gauge(m.maxKeys, float64(s.MaxKeys), s.Quota)
			counter(m.evictions, s.EvictedIdle, s.Quota, "idle")
			counter(m.evictions, s.EvictedLRU, s.Quota, "lru")
			for _, mode := range []string{quota.ModeLocal, quota.ModeFleet, quota.ModeFallback} {
				v := 0.0
				if s.Mode == mode {
					v = 1
				}
				gauge(m.mode, v, s.Quota, mode)
			}
			counter(m.fallbacks, s.FallbackDecisions, s.Quota)
			counter(m.storeErrors, s.StoreErrors, s.Quota)
		}
	}
}

var _ prometheus.Collector = (*quotaMetrics)(nil)
