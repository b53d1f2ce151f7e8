package promsluice_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/quota"
)

func TestQuotaMetricsFromARealQuota(t *testing.T) {
	q, err := quota.New(quota.Config{Name: "api", Rate: 1, Burst: 1, MaxKeys: 2, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(100, 0)
	_ = q.AllowNAt("a", 1, now) // allowed
	_ = q.AllowNAt("a", 1, now) // limited
	_ = q.AllowNAt("b", 1, now) // allowed
	_ = q.AllowNAt("c", 1, now) // allowed, evicts a (lru)
	reg := prometheus.NewPedanticRegistry()
	m := promsluice.NewMetrics()
	if err := m.Add(q); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(m)
	want := `
# HELP sluice_quota_allowed_total Quota decisions that admitted the request.
# TYPE sluice_quota_allowed_total counter
sluice_quota_allowed_total{quota="api"} 3
# HELP sluice_quota_evictions_total Keys dropped from the quota's table.
# TYPE sluice_quota_evictions_total counter
sluice_quota_evictions_total{cause="idle",quota="api"} 0
sluice_quota_evictions_total{cause="lru",quota="api"} 1
# HELP sluice_quota_keys Keys in the quota's table.
# TYPE sluice_quota_keys gauge
sluice_quota_keys{quota="api"} 2
# HELP sluice_quota_limited_total Quota decisions rejected with reason rate (HTTP 429).
# TYPE sluice_quota_limited_total counter
sluice_quota_limited_total{quota="api"} 1
# HELP sluice_quota_mode 1 for the mode the quota decides in now.
# TYPE sluice_quota_mode gauge
sluice_quota_mode{mode="fallback",quota="api"} 0
sluice_quota_mode{mode="fleet",quota="api"} 0
sluice_quota_mode{mode="local",quota="api"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"sluice_quota_allowed_total", "sluice_quota_limited_total", "sluice_quota_keys",
		"sluice_quota_evictions_total", "sluice_quota_mode"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 13+3 {
		t.Fatalf("%d series (%v), want 13 of the quota and 3 of its rejections in the admission family", n, err)
	}
	// Its rejections, attributable like a gate's: the 429 under the
	// quota's name with reason rate.
	if got := testutil.ToFloat64(collectorFor(t, reg, "sluice_admission_rejected_total", `gate="api"`, `reason="rate"`)); got != 1 {
		t.Fatalf("sluice_admission_rejected_total{gate=api,reason=rate} = %v, want 1", got)
	}
}
