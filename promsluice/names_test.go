package promsluice_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/connlimit"
	"github.com/sluicehq/sluice/internal/metricname"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/pool"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/retry"
)

// TestExportedNamesAreListed: every collector, each fed one real source
// and driven until every family it has appears, is registered on one
// registry; the families the registry gathers are exactly those
// internal/metricname lists for promsluice, each of the kind listed. The
// readers (load, doctor) take their names from that list, so a family
// renamed or added here without the list fails this test.
func TestExportedNamesAreListed(t *testing.T) {
	defer goleak.VerifyNone(t)
	reg := prometheus.NewPedanticRegistry()

	gm := promsluice.NewMetrics()
	reg.MustRegister(gm)
	g, err := gm.NewGate(admit.Config{Name: "db", Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.TryAcquireFor(admit.Request{Class: admit.ClassSheddable}) // per-class families appear
	if err != nil {
		t.Fatal(err)
	}
	p.Done(admit.OutcomeOK)
	// A queued wait and a hold: the two histograms get a sample each.
	gm.ObserveAdmission(admit.AdmissionEvent{Gate: "db", Kind: "default", Accepted: true, Wait: time.Millisecond})
	gm.ObserveCompletion(admit.CompletionEvent{Gate: "db", Kind: "default", Outcome: admit.OutcomeOK, Weight: 1, Hold: time.Millisecond})

	b, err := breaker.New(breaker.Config{Name: "up"})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := connlimit.Listen(ctx, "tcp", "127.0.0.1:0", connlimit.Config{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	a, err := limit.New(limit.Config{Law: &limit.AIMD{}, Initial: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Attach(g); err != nil {
		t.Fatal(err)
	}
	pl, err := pool.New(pool.Config{Name: "thumbs", Core: 1, Observer: gm})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Shutdown(context.Background())
	gm.ObserveDone(pool.DoneEvent{Pool: "thumbs", Outcome: admit.OutcomeOK, Wait: time.Millisecond, Run: time.Millisecond})

	q, err := quota.New(quota.Config{Name: "per-client", Rate: 10})
	if err != nil {
		t.Fatal(err)
	}
	rp, err := retry.New(retry.Config{Name: "up"})
	if err != nil {
		t.Fatal(err)
	}
	if err := gm.Add(b, a, pl, q, rp); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(promsluice.NewCacheMetrics(func() promsluice.CacheStats { return promsluice.CacheStats{} }),
		promsluice.NewConnMetrics(l))

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
	listed := map[string]metricname.Kind{}
	for _, f := range metricname.Promsluice() {
		listed[f.Name] = f.Kind
	}
	var missing, unlisted []string
	for name, k := range listed {
		switch got, ok := gathered[name]; {
		case !ok:
			missing = append(missing, name)
		case got != k:
			t.Errorf("%s is exported as a %v, listed as a %v", name, got, k)
		}
	}
	for name := range gathered {
		if _, ok := listed[name]; !ok {
			unlisted = append(unlisted, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(unlisted)
	if len(missing) > 0 || len(unlisted) > 0 {
		t.Errorf("listed but not exported: %q\nexported but not listed: %q", missing, unlisted)
	}
}
