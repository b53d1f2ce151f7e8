package promsluice_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/admit"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/quota"
)

// TestRefusalsOutsideGatesShareTheFamily: refusals added with AddRefusals
// (a real quota through QuotaRefusals, and a hand-made source) are
// exported in sluice_admission_rejected_total by the one collector that
// owns it, beside the gate's; a series both report is summed, never
// exported twice (a pedantic registry would refuse that).
func TestRefusalsOutsideGatesShareTheFamily(t *testing.T) {
	gm := promsluice.NewGateMetrics()
	g, err := gm.NewGate(admit.Config{Name: "db", Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := g.TryAcquire()
	if _, err := g.TryAcquire(); err == nil {
		t.Fatal("a full gate admitted")
	}
	p.Done(admit.OutcomeOK)
	q, err := quota.New(quota.Config{Name: "per-client", Rate: 1, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(100, 0)
	for range 3 {
		_ = q.AllowNAt("k", 1, now) // one allowed, two limited
	}
	gm.AddRefusals(promsluice.QuotaRefusals(q.Stats))
	gm.AddRefusals(func() []promsluice.Refusal {
		return []promsluice.Refusal{
			{Gate: "db", Reason: "full", Count: 4}, // a gate's own series: summed into it
			{Gate: "upstream-breaker", Reason: "breaker_open", Count: 2},
			{Gate: "upstream-breaker", Kind: "default", Reason: "breaker_open", Count: 1},
		}
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(gm)
	want := `
# HELP sluice_admission_rejected_total Attempts refused, by reason.
# TYPE sluice_admission_rejected_total counter
sluice_admission_rejected_total{gate="db",kind="default",reason="breaker_open"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="canceled"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="closed"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="deadline"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="full"} 5
sluice_admission_rejected_total{gate="db",kind="default",reason="queue_full"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="rate"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="shed"} 0
sluice_admission_rejected_total{gate="db",kind="default",reason="wait_timeout"} 0
sluice_admission_rejected_total{gate="per-client",kind="default",reason="breaker_open"} 0
sluice_admission_rejected_total{gate="per-client",kind="default",reason="full"} 0
sluice_admission_rejected_total{gate="per-client",kind="default",reason="rate"} 2
sluice_admission_rejected_total{gate="upstream-breaker",kind="default",reason="breaker_open"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_admission_rejected_total"); err != nil {
		t.Error(err)
	}
}

// A quota refuses without a gate; AddRefusals puts its refusals in the
// gates' family so `sluice load --metrics` can attribute a 429 to it.
func ExampleGateMetrics_AddRefusals() {
	perClient, _ := quota.New(quota.Config{Name: "per-client", Rate: 1, Burst: 1})
	_ = perClient.AllowNAt("alice", 1, time.Unix(0, 0))
	_ = perClient.AllowNAt("alice", 1, time.Unix(0, 0)) // refused: rate

	gm := promsluice.NewGateMetrics()
	gm.AddRefusals(promsluice.QuotaRefusals(perClient.Stats))
	reg := prometheus.NewRegistry()
	reg.MustRegister(gm)
	fams, _ := reg.Gather()
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				fmt.Println(f.GetName(), m.GetLabel()[0].GetValue(), m.GetLabel()[2].GetValue(), v)
			}
		}
	}
	// Output: sluice_admission_rejected_total per-client rate 1
}

// TestRefusalsScrapedWhileCounting gathers while refusals are counted and
// sources are added from other goroutines: every scrape succeeds (no
// duplicate series) and the exported count never goes down.
// Over a second under -race: 200 full gathers of a pedantic registry while
// other goroutines count and add sources.
func TestRefusalsScrapedWhileCounting(t *testing.T) {
	gm := promsluice.NewGateMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(gm)
	var n atomic.Uint64
	source := func() []promsluice.Refusal {
		return []promsluice.Refusal{{Gate: "upstream-breaker", Reason: "breaker_open", Count: n.Load()}}
	}
	gm.AddRefusals(source)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				n.Add(1)
			}
		}
	})
	wg.Go(func() {
		for i := range 50 {
			gm.AddRefusals(func() []promsluice.Refusal {
				return []promsluice.Refusal{{Gate: fmt.Sprintf("q%d", i), Reason: "rate", Count: 1}}
			})
		}
	})
	var last float64
	for range 200 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == "upstream-breaker" {
					v := m.GetCounter().GetValue()
					if v < last {
						t.Fatalf("breaker refusals went from %v to %v", last, v)
					}
					last = v
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	if last == 0 {
		t.Fatal("no refusal was ever exported")
	}
}
