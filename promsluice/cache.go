package promsluice

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/metricname"
)

// CacheStats is what CacheMetrics exports: a content cache's counters,
// read at scrape time from the cache's own snapshot.
type CacheStats struct {
	Hits      uint64 // requests answered from memory
	Misses    uint64 // requests that had to go to the backing store
	Evictions uint64 // entries dropped to make room
	Entries   int    // entries held now
	Bytes     int64  // content bytes held now
}

// CacheMetrics exports one cache's counters as sluice_cache_*. It reads
// them at scrape time through a function, so the cache (package static)
// never imports client_golang and this package never imports the cache.
type CacheMetrics struct {
	read                                      func() CacheStats
	hits, misses, evictions, entries, byteSum *prometheus.Desc
}

// NewCacheMetrics returns a collector over read.
func NewCacheMetrics(read func() CacheStats) *CacheMetrics {
	return &CacheMetrics{
		read:      read,
		hits:      prometheus.NewDesc(metricname.CacheHits, "Requests answered from the cache.", nil, nil),
		misses:    prometheus.NewDesc(metricname.CacheMisses, "Requests that found no fresh cache entry.", nil, nil),
		evictions: prometheus.NewDesc(metricname.CacheEvictions, "Cache entries dropped to make room.", nil, nil),
		entries:   prometheus.NewDesc(metricname.CacheEntries, "Entries held by the cache.", nil, nil),
		byteSum:   prometheus.NewDesc(metricname.CacheBytes, "Content bytes held by the cache.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *CacheMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.hits, m.misses, m.evictions, m.entries, m.byteSum} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *CacheMetrics) Collect(ch chan<- prometheus.Metric) {
	s := m.read()
	ch <- prometheus.MustNewConstMetric(m.hits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(m.misses, prometheus.CounterValue, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(m.evictions, prometheus.CounterValue, float64(s.Evictions))
	ch <- prometheus.MustNewConstMetric(m.entries, prometheus.GaugeValue, float64(s.Entries))
	ch <- prometheus.MustNewConstMetric(m.byteSum, prometheus.GaugeValue, float64(s.Bytes))
}

var _ prometheus.Collector = (*CacheMetrics)(nil)
