package promsluice_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/promsluice"
)

func TestMetricsExportsCountersAndHistograms(t *testing.T) {
	m := promsluice.NewMetrics()
	g, err := admit.New(admit.Config{Name: "disk", Capacity: 1, Kinds: []string{"read"}, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	m.Add(g)
	m.Add(g) // twice is a no-op, not a duplicate metric
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)

	p, err := g.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.TryAcquire(); err == nil {
		t.Fatal("second TryAcquire on a 1-slot gate was admitted")
	}
	p.Done(admit.OutcomeError)
	q, _ := g.TryAcquire()
	q.Done(admit.OutcomeOK)

	want := `
# HELP sluice_admission_offered_total Attempts that reached the gate.
# TYPE sluice_admission_offered_total counter
sluice_admission_offered_total{gate="disk",kind="read"} 3
# HELP sluice_admission_admitted_total Attempts that got a slot.
# TYPE sluice_admission_admitted_total counter
sluice_admission_admitted_total{gate="disk",kind="read"} 2
# HELP sluice_admission_inflight Admitted work not yet completed.
# TYPE sluice_admission_inflight gauge
sluice_admission_inflight{gate="disk"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"sluice_admission_offered_total", "sluice_admission_admitted_total", "sluice_admission_inflight"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(collectorFor(t, reg, "sluice_admission_rejected_total", `reason="full"`, `kind="read"`)); got != 1 {
		t.Errorf("rejected{reason=full,kind=read} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(collectorFor(t, reg, "sluice_admission_completed_total", `outcome="error"`, `kind="read"`)); got != 1 {
		t.Errorf("completed{outcome=error,kind=read} = %v, want 1", got)
	}
	n, err := testutil.GatherAndCount(reg, "sluice_admission_hold_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 { // one series per kind that completed with a sample
		t.Errorf("hold histogram series = %d, want 1", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

// collectorFor returns a collector that yields the one gathered sample of
// name whose labels contain every fragment in match.
func collectorFor(t *testing.T, reg *prometheus.Registry, name string, match ...string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, mt := range mf.GetMetric() {
			labels := ""
			for _, lp := range mt.GetLabel() {
				labels += lp.GetName() + `="` + lp.GetValue() + `" `
			}
			for _, frag := range match {
				if !strings.Contains(labels, frag) {
					continue metrics
				}
			}
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
			c.Add(mt.GetCounter().GetValue())
			return c
		}
	}
	t.Fatalf("no %s sample matching %v", name, match)
	return nil
}

// A nil *Metrics passed as an Observer (a typed nil in the interface)
// must not panic on the first event.
func TestNilMetricsObservesNothing(t *testing.T) {
	var m *promsluice.Metrics
	m.ObserveAdmission(admit.AdmissionEvent{Wait: 1})
	m.ObserveCompletion(admit.CompletionEvent{Hold: 1})
	g, err := admit.New(admit.Config{Observer: m, MaxWaiters: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	p.Done(admit.OutcomeOK)
}
