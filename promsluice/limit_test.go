package promsluice_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/promsluice"
)

func TestLimitMetricsExportsState(t *testing.T) {
	var now time.Time
	clock := func() time.Time { return now }
	now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g, a, err := limit.NewGate(admit.Config{Name: "upstream", Capacity: 10},
		&limit.Config{Law: &limit.AIMD{}, Initial: 10, SLO: 50 * time.Millisecond, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	m := promsluice.NewMetrics()
	if err := m.Add(a, a); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)

	// One window of ten slow completions (above the SLO): the limit backs off.
	a.ObserveAdmission(admit.AdmissionEvent{Accepted: true, Inflight: 10})
	for range 10 {
		a.ObserveCompletion(admit.CompletionEvent{Gate: "upstream", Outcome: admit.OutcomeOK, Weight: 1, Hold: 80 * time.Millisecond})
	}
	now = now.Add(limit.DefaultWindow)
	a.Decide()

	want := `
# HELP sluice_limit_capacity Capacity the adaptive limit last set on the gate, in slots.
# TYPE sluice_limit_capacity gauge
sluice_limit_capacity{gate="upstream",law="aimd"} 9
# HELP sluice_limit_overload 1 if the last window was above the SLO ceiling.
# TYPE sluice_limit_overload gauge
sluice_limit_overload{gate="upstream"} 1
# HELP sluice_limit_ceiling_seconds The SLO ceiling the limit is anchored to (0: none).
# TYPE sluice_limit_ceiling_seconds gauge
sluice_limit_ceiling_seconds{gate="upstream"} 0.05
# HELP sluice_limit_windows_total Windows judged.
# TYPE sluice_limit_windows_total counter
sluice_limit_windows_total{gate="upstream"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"sluice_limit_capacity", "sluice_limit_overload", "sluice_limit_ceiling_seconds", "sluice_limit_windows_total"); err != nil {
		t.Error(err)
	}
	// The SLO's inputs: nothing queued, so the hold's budget is the whole
	// SLO; the tail is the window's 99th percentile (80 ms, within the
	// histogram's resolution).
	if got := gaugeValue(t, reg, "sluice_limit_budget_seconds"); got != 0.05 {
		t.Errorf("budget %v, want 0.05", got)
	}
	if got := gaugeValue(t, reg, "sluice_limit_queue_wait_seconds"); got != 0 {
		t.Errorf("queue wait %v, want 0", got)
	}
	if got := gaugeValue(t, reg, "sluice_limit_tail_seconds"); got < 0.075 || got > 0.085 {
		t.Errorf("tail %v, want about 0.08", got)
	}
	if g.Capacity() != 9 {
		t.Errorf("gate capacity %d, want 9", g.Capacity())
	}
	if got := testutil.ToFloat64(collectorFor(t, reg, "sluice_limit_decisions_total", `decision="shrink"`)); got != 1 {
		t.Errorf("decisions{shrink} = %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "sluice_limit_decisions_total"); err != nil || n != int(limit.NumDecisions)-1 {
		t.Errorf("decision series %d (%v), want one per decision", n, err)
	}
}
