package ratelimit

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestExportedNamesAreListed: a Service on Redis, once it has decided,
// exports exactly the families internal/metricname lists for it, each of
// its listed kind.
func TestExportedNamesAreListed(t *testing.T) {
	srv := redistest.Start(t)
	s := mustService(t, Config{Redis: newClient(t, srv.Addr()), Prefix: "names:", Timeout: time.Second}, fleetYAML)
	if _, err := s.ShouldRateLimit(context.Background(), req("fleet", desc("gcra", "k"))); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[dto.MetricType]metricname.Kind{
		dto.MetricType_COUNTER: metricname.Counter, dto.MetricType_GAUGE: metricname.Gauge, dto.MetricType_HISTOGRAM: metricname.Histogram,
	}
	gathered := map[string]metricname.Kind{}
	for _, f := range fams {
		gathered[f.GetName()] = kinds[f.GetType()]
	}
	var missing, unlisted []string
	listed := map[string]bool{}
	for _, f := range metricname.Ratelimit() {
		listed[f.Name] = true
		switch got, ok := gathered[f.Name]; {
		case !ok:
			missing = append(missing, f.Name)
		case got != f.Kind:
			t.Errorf("%s is exported as a %v, listed as a %v", f.Name, got, f.Kind)
		}
	}
	for name := range gathered {
		if !listed[name] {
			unlisted = append(unlisted, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(unlisted)
	if len(missing) > 0 || len(unlisted) > 0 {
		t.Errorf("listed but not exported: %q\nexported but not listed: %q", missing, unlisted)
	}
}
