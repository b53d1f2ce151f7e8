package promsluice_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/promsluice"
)

func TestCacheMetricsReadAtScrape(t *testing.T) {
	stats := promsluice.CacheStats{Hits: 7, Misses: 2, Evictions: 1, Entries: 3, Bytes: 4096}
	m := promsluice.NewCacheMetrics(func() promsluice.CacheStats { return stats })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	stats.Hits = 9 // read at scrape time, not at construction
	want := `
# HELP sluice_cache_bytes Content bytes held by the cache.
# TYPE sluice_cache_bytes gauge
sluice_cache_bytes 4096
# HELP sluice_cache_hits_total Requests answered from the cache.
# TYPE sluice_cache_hits_total counter
sluice_cache_hits_total 9
# HELP sluice_cache_misses_total Requests that found no fresh cache entry.
# TYPE sluice_cache_misses_total counter
sluice_cache_misses_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_cache_hits_total", "sluice_cache_misses_total", "sluice_cache_bytes"); err != nil {
		t.Error(err)
	}
}
