package promsluice

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/quota"
)

// TestRemoveRetiresSeries: a gate and an adaptive limit removed stop being
// exported, histograms included, while the others stay, and may be added
// again; the quotas a func() []quota.Stats part reads are those of the
// scrape, counters and refusals alike.
func TestRemoveRetiresSeries(t *testing.T) {
	m := NewMetrics()
	kept, err := m.NewGate(admit.Config{Name: "kept", Capacity: 2, MaxWaiters: 1})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := m.NewGate(admit.Config{Name: "gone", Capacity: 2, MaxWaiters: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*admit.Gate{kept, gone} {
		p, err := g.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		p.Done(admit.OutcomeOK)
	}
	count := func(gate string) int {
		n := 0
		for _, family := range []string{"sluice_admission_capacity", "sluice_admission_hold_seconds"} {
			n += countWithLabel(t, m, family, "gate", gate)
		}
		return n
	}
	if count("kept") != 2 || count("gone") != 2 {
		t.Fatalf("before Remove: kept %d, gone %d series; want 2 each", count("kept"), count("gone"))
	}
	if err := m.Remove(gone); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(gone); err != nil { // a no-op
		t.Fatal(err)
	}
	if count("kept") != 2 || count("gone") != 0 {
		t.Fatalf("after Remove: kept %d, gone %d series; want 2 and 0", count("kept"), count("gone"))
	}
	if gs := m.Gates(); len(gs) != 1 || gs[0] != kept {
		t.Fatalf("Gates after Remove: %v", gs)
	}

	if err := m.Remove("gone"); err == nil {
		t.Error("Remove of a string: no error")
	}
	lm := NewMetrics()
	a, err := limit.New(limit.Config{Max: 4, Initial: 4, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Attach(kept); err != nil {
		t.Fatal(err)
	}
	if err := lm.Add(a); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(lm, "sluice_limit_capacity"); n != 1 {
		t.Fatalf("limit series before Remove: %d", n)
	}
	if err := lm.Remove(a); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(lm, "sluice_limit_capacity"); n != 0 {
		t.Fatalf("limit series after Remove: %d", n)
	}
	if err := lm.Add(a); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(lm, "sluice_limit_capacity"); n != 1 {
		t.Fatalf("limit series after adding it again: %d", n)
	}

	var current []quota.Stats
	qm := NewMetrics()
	if err := qm.Add(func() []quota.Stats { return current }); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(qm, "sluice_quota_allowed_total"); n != 0 {
		t.Fatalf("no quotas yet, %d series", n)
	}
	current = []quota.Stats{{Quota: "a", Allowed: 3}, {Quota: "b"}}
	if n := testutil.CollectAndCount(qm, "sluice_quota_allowed_total"); n != 2 {
		t.Fatalf("two quotas, %d series", n)
	}
	if n := countWithLabel(t, qm, "sluice_admission_rejected_total", "gate", "a"); n != 3 {
		t.Fatalf("quota a's refusals: %d series, want 3 (rate, full, breaker_open)", n)
	}
}

// countWithLabel counts the series of family that c exports with
// label=value.
func countWithLabel(t *testing.T, c prometheus.Collector, family, label, value string) int {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					n++
				}
			}
		}
	}
	return n
}
