package promsluice_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/promsluice"
)

func TestMetricsOldestWaitAndClasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := promsluice.NewMetrics()
		g, err := admit.New(admit.Config{Name: "disk", Capacity: 1, MaxWaiters: 4, MaxWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		m.Add(g)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(m)
		if n, _ := testutil.GatherAndCount(reg, "sluice_admission_class_admitted_total"); n != 0 {
			t.Fatalf("a gate that never saw a class exports %d per-class series", n)
		}
		held, _ := g.TryAcquire()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			p, err := g.AcquireFor(ctx, admit.Request{Class: admit.ClassSheddable})
			if err == nil {
				p.Done(admit.OutcomeOK)
			}
		}()
		synctest.Wait()
		time.Sleep(250 * time.Millisecond)
		if got := gaugeValue(t, reg, "sluice_admission_oldest_wait_seconds", `gate="disk"`); got != 0.25 {
			t.Errorf("oldest wait %v, want 0.25", got)
		}
		if got := gaugeValue(t, reg, "sluice_admission_class_waiting", `class="sheddable"`); got != 1 {
			t.Errorf("sheddable waiting %v, want 1", got)
		}
		held.Done(admit.OutcomeOK)
		synctest.Wait()
		if got := testutil.ToFloat64(collectorFor(t, reg, "sluice_admission_class_admitted_total", `class="sheddable"`)); got != 1 {
			t.Errorf("sheddable admitted %v, want 1", got)
		}
		if got := testutil.ToFloat64(collectorFor(t, reg, "sluice_admission_class_admitted_total", `class="critical"`)); got != 1 {
			t.Errorf("critical admitted %v, want 1", got)
		}
		if got := gaugeValue(t, reg, "sluice_admission_oldest_wait_seconds", `gate="disk"`); got != 0 {
			t.Errorf("oldest wait %v with nobody queued", got)
		}
	})
}

// gaugeValue is the value of the one gauge series of name whose labels
// contain every fragment of match.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string, match ...string) float64 {
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
			return mt.GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s %v", name, match)
	return 0
}
