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
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/quota"
)

// countingObserver counts admissions, to show NewGate keeps an Observer
// the caller set.
type countingObserver struct{ admissions int }

func (c *countingObserver) ObserveAdmission(admit.AdmissionEvent)   { c.admissions++ }
func (c *countingObserver) ObserveCompletion(admit.CompletionEvent) {}

// Metrics.NewGate is the one step for a gate: counters, gauges and both
// histograms appear without an Add or an Observer, and the caller's own
// Observer keeps its events.
func TestNewGateWiresEverythingInOneStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		m := promsluice.NewMetrics()
		reg.MustRegister(m)
		own := &countingObserver{}
		db, err := m.NewGate(admit.Config{Name: "db", Capacity: 1, MaxWaiters: 1, Observer: own})
		if err != nil {
			t.Fatal(err)
		}
		up, err := m.NewGate(admit.Config{Name: "upstream"})
		if err != nil {
			t.Fatalf("second gate: %v", err)
		}

		p, err := db.TryAcquire()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			q, err := db.Acquire(context.Background()) // queues behind p
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(10 * time.Millisecond)
			q.Done(admit.OutcomeOK)
		}()
		synctest.Wait()
		time.Sleep(20 * time.Millisecond)
		p.Done(admit.OutcomeOK)
		<-done
		u, _ := up.TryAcquire()
		time.Sleep(time.Millisecond) // a hold of zero is no sample
		u.Done(admit.OutcomeOK)

		if own.admissions != 2 {
			t.Errorf("the caller's own Observer saw %d admissions, want 2", own.admissions)
		}
		want := `
# HELP sluice_admission_admitted_total Attempts that got a slot.
# TYPE sluice_admission_admitted_total counter
sluice_admission_admitted_total{gate="db",kind="default"} 2
sluice_admission_admitted_total{gate="upstream",kind="default"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_admission_admitted_total"); err != nil {
			t.Error(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		series := map[string][]string{} // histogram name -> "gate/kind count"
		for _, mf := range mfs {
			if !strings.HasSuffix(mf.GetName(), "_seconds") {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				series[mf.GetName()] = append(series[mf.GetName()], l["gate"]+"/"+l["kind"]+" "+itoa(m.GetHistogram().GetSampleCount()))
			}
		}
		// Both histograms carry the same labels, gate and kind: the queued
		// caller waited once; three permits were held.
		if got := strings.Join(series["sluice_admission_wait_seconds"], ","); got != "db/default 1" {
			t.Errorf("wait_seconds series %q, want db/default 1", got)
		}
		if got := strings.Join(series["sluice_admission_hold_seconds"], ","); got != "db/default 2,upstream/default 1" {
			t.Errorf("hold_seconds series %q, want db/default 2,upstream/default 1", got)
		}
		problems, err := testutil.GatherAndLint(reg)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint %s: %s", p.Metric, p.Text)
		}
	})
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

func TestNewGateAndAddErrors(t *testing.T) {
	m := promsluice.NewMetrics()
	if _, err := m.NewGate(admit.Config{MaxWait: time.Second}); err == nil {
		t.Error("a config admit.New refuses was accepted")
	}
	db, err := m.NewGate(admit.Config{Name: "db"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.NewGate(admit.Config{Name: "db"}); err == nil || !strings.Contains(err.Error(), `"db"`) {
		t.Errorf("second gate named db: err = %v, want a clash", err)
	}
	other, _ := admit.New(admit.Config{Name: "db"})
	if err := m.Add(other); err == nil || !strings.Contains(err.Error(), `"db"`) {
		t.Errorf("Add of another gate named db: err = %v, want a clash", err)
	}
	if err := m.Add(db); err != nil {
		t.Errorf("Add of a gate m already exports: %v, want a no-op", err)
	}
	var nilBreaker *breaker.Breaker
	var nilQuota *quota.Quota
	q, _ := quota.New(quota.Config{Name: "q"})
	for _, bad := range []any{"db", 42, nilBreaker, nilQuota, nil} {
		if err := m.Add(q, bad); err == nil {
			t.Errorf("Add(%#v) accepted", bad)
		}
	}
	if got := len(m.Gates()); got != 1 {
		t.Errorf("%d gates exported after the refused Adds, want 1", got)
	}
	// A refused Add adds nothing, the quota listed before the bad part
	// included.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	if n, err := testutil.GatherAndCount(reg, "sluice_quota_allowed_total"); err != nil || n != 0 {
		t.Errorf("quota series after a refused Add: %d (%v), want 0", n, err)
	}
	// A registry that already holds a different collector with these
	// names is an error, not a silent loss of metrics.
	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_admission_capacity", Help: "x"}))
	if err := clash.Register(promsluice.NewMetrics()); err == nil {
		t.Error("registering over a clashing collector succeeded")
	}
}

func TestMetricsNewGateAndGates(t *testing.T) {
	m := promsluice.NewMetrics()
	a, err := m.NewGate(admit.Config{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.NewGate(admit.Config{Name: "b", Observer: m}) // m twice would count twice
	if err != nil {
		t.Fatal(err)
	}
	if gs := m.Gates(); len(gs) != 2 || gs[0] != a || gs[1] != b {
		t.Fatalf("Gates() = %v", gs)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	p, _ := b.TryAcquire()
	time.Sleep(time.Millisecond) // a hold of zero is no sample
	p.Done(admit.OutcomeOK)
	if n, err := testutil.GatherAndCount(reg, "sluice_admission_hold_seconds"); err != nil || n != 1 {
		t.Fatalf("hold series %d, %v", n, err)
	}
	if got := sampleCount(t, reg, "sluice_admission_hold_seconds"); got != 1 {
		t.Errorf("hold samples %d, want 1 (an Observer given twice counts twice)", got)
	}
}

func sampleCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}
