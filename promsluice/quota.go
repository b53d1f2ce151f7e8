package promsluice

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/quota"
)

// QuotaMetrics exports rate quotas' counters as sluice_quota_*, labelled by
// the quota's name only (never a key: keys are unbounded). It reads each
// quota's Stats at scrape time, so deciding costs nothing extra.
//
//	sluice_quota_allowed_total{quota}           decisions admitted
//	sluice_quota_limited_total{quota}           decisions refused with reason rate (429)
//	sluice_quota_refused_total{quota,reason}    refused for another reason: full (key table full,
//	                                            RefuseNew) or breaker_open (fleet store down, fail closed)
//	sluice_quota_keys{quota}                    keys in the table now
//	sluice_quota_max_keys{quota}                the table's bound
//	sluice_quota_evictions_total{quota,cause}   keys dropped: idle or lru
//	sluice_quota_mode{quota,mode}               1 for the mode deciding now: local, fleet or fallback
//	sluice_quota_fallback_decisions_total{quota} fleet quotas: decisions made without the store
//	sluice_quota_store_errors_total{quota}      fleet quotas: store calls that failed or timed out
//
// Safe for concurrent use; Add before registering.
type QuotaMetrics struct {
	sources []func() quota.Stats

	allowed, limited, refused, keys, maxKeys, evictions, mode, fallbacks, storeErrors *prometheus.Desc
}

// NewQuotaMetrics returns a collector over the given Stats functions (a
// *quota.Quota's or a fleet quota's Stats method).
func NewQuotaMetrics(sources ...func() quota.Stats) *QuotaMetrics {
	q := []string{"quota"}
	return &QuotaMetrics{
		sources:     sources,
		allowed:     prometheus.NewDesc(metricname.QuotaAllowed, "Quota decisions that admitted the request.", q, nil),
		limited:     prometheus.NewDesc(metricname.QuotaLimited, "Quota decisions refused with reason rate (HTTP 429).", q, nil),
		refused:     prometheus.NewDesc(metricname.QuotaRefused, "Quota decisions refused for a reason other than rate.", []string{"quota", "reason"}, nil),
		keys:        prometheus.NewDesc(metricname.QuotaKeys, "Keys in the quota's table.", q, nil),
		maxKeys:     prometheus.NewDesc(metricname.QuotaMaxKeys, "Bound of the quota's key table.", q, nil),
		evictions:   prometheus.NewDesc(metricname.QuotaEvictions, "Keys dropped from the quota's table.", []string{"quota", "cause"}, nil),
		mode:        prometheus.NewDesc(metricname.QuotaMode, "1 for the mode the quota decides in now.", []string{"quota", "mode"}, nil),
		fallbacks:   prometheus.NewDesc(metricname.QuotaFallbackDecisions, "Fleet quota decisions made by the fallback policy.", q, nil),
		storeErrors: prometheus.NewDesc(metricname.QuotaStoreErrors, "Fleet quota store calls that failed or timed out.", q, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *QuotaMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.allowed, m.limited, m.refused, m.keys, m.maxKeys, m.evictions, m.mode, m.fallbacks, m.storeErrors} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *QuotaMetrics) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, read := range m.sources {
		s := read()
		counter(m.allowed, s.Allowed, s.Quota)
		counter(m.limited, s.Limited, s.Quota)
		counter(m.refused, s.RefusedFull, s.Quota, "full")
		counter(m.refused, s.RefusedStore, s.Quota, "breaker_open")
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

var _ prometheus.Collector = (*QuotaMetrics)(nil)
